import Foundation
import HummingbirdWSClient
import Logging
import NIOConcurrencyHelpers
import NIOHTTP1

extension BenchScenarios {
    // MARK: - Read to sender under load

    /// The idle measurement again, while `concurrency` other clients mark reads at a paced
    /// 2,000 reads/s in chats of their own (or as fast as the service goes, when slower).
    func readToSenderUnderLoad(into results: inout BenchResults) async throws {
        let targetRate = 2_000.0
        let samples = self.count(200, minimum: 20)
        // Enough unread messages for the load to last the measurement (a sample sends, reads
        // and waits: a few ms each; 30 ms of load per sample leaves a wide margin).
        let perChat = max(100, Int(targetRate * Double(samples + 20) * 0.03) / self.concurrency)
        for index in 0..<self.concurrency {
            try await self.client.expect(201, .PUT, "/v1/chats/load\(index)", as: self.tenant.apiKey,
                                         body: ["kind": "direct", "members": ["ls\(index)", "lr\(index)"]])
            try await self.insertMessages(chat: "load\(index)", sender: "ls\(index)", count: perChat)
        }
        try await self.settleDatabase()
        let client = self.client
        let key = self.tenant.apiKey
        let perClientInterval = Duration.seconds(Double(self.concurrency) / targetRate)
        let (latencies, loadRate) = try await withThrowingTaskGroup(of: Int.self) { group in
            let start = ContinuousClock.now
            for index in 0..<self.concurrency {
                group.addTask {
                    var marked = 0
                    var next = ContinuousClock.now
                    for message in 1...perChat {
                        if Task.isCancelled { break }
                        do {
                            try await client.check(200, .POST, "/v1/chats/load\(index)/read", as: key,
                                                    body: ["userId": "lr\(index)", "messageIds": ["load\(index)-\(message)"]])
                        } catch where Task.isCancelled {
                            break  // the measurement is over; a request cut short is not a failure
                        }
                        marked += 1
                        next += perClientInterval
                        if next > .now { try? await Task.sleep(until: next) }
                    }
                    return marked
                }
            }
            let latencies = try await self.measureReadToSender(chat: "latency-load", samples: samples).delivered
            let seconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
            group.cancelAll()
            let marked = try await group.reduce(0, +)
            return (latencies, Double(marked) / seconds)
        }
        results.add("read-to-sender latency under load", latencies: latencies, target: "p99 ≤ 25 at 2,000 reads/s",
                    note: "n=\(latencies.count), load \(Int(loadRate)) reads/s")
    }

    // MARK: - Fan-out

    /// One read in a large group reaches every member's WebSocket: milliseconds until the
    /// last one has it, and the service's memory per idle connection.
    func fanOut(into results: inout BenchResults) async throws {
        let members = self.count(1000, minimum: 20)
        let users = (0..<members).map { "f\($0)" }
        let key = self.tenant.apiKey
        try await self.client.expect(201, .PUT, "/v1/chats/fanout", as: key, body: ["kind": "group", "members": users])
        let client = self.client
        let tokens = try await withThrowingTaskGroup(of: [String].self) { group in
            for batch in stride(from: 0, to: members, by: self.concurrency) {
                group.addTask {
                    var tokens: [String] = []
                    for user in users[batch..<min(members, batch + self.concurrency)] {
                        tokens.append(try await client.expect(201, .POST, "/v1/tokens", as: key, body: ["userId": user])["token"] as! String)
                    }
                    return tokens
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let memoryBefore = self.serviceMemoryKiB()
        let opened = NIOLockedValueBox(0)
        let arrivals = NIOLockedValueBox([String: [ContinuousClock.Instant]]())
        let base = self.client.baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/v1/stream?token="
        var fanOutMilliseconds: [Double] = []
        var perConnectionKiB = Double.nan
        try await withThrowingTaskGroup(of: Void.self) { group in
            var started = 0
            for token in tokens {
                group.addTask {
                    try await WebSocketClient.connect(url: base + token, logger: Logger(label: "bench-fanout")) { inbound, _, _ in
                        opened.withLockedValue { $0 += 1 }
                        for try await message in inbound.messages(maxSize: 1 << 20) {
                            let now = ContinuousClock.now
                            guard case .text(let text) = message, let type = Self.eventType(of: text) else { continue }
                            arrivals.withLockedValue { $0[type, default: []].append(now) }
                        }
                    }
                }
                // Connect a few at a time, as devices would, rather than all in one burst.
                started += 1
                let deadline = ContinuousClock.now + .seconds(30)
                while started - opened.withLockedValue({ $0 }) > 64, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(1))
                }
            }
            let deadline = ContinuousClock.now + .seconds(60)
            while opened.withLockedValue({ $0 }) < members, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            guard opened.withLockedValue({ $0 }) == members else { throw BenchFailure("only \(opened.withLockedValue { $0 }) of \(members) WebSockets opened") }
            try await Task.sleep(for: .seconds(1))
            if let before = memoryBefore, let after = self.serviceMemoryKiB() {
                perConnectionKiB = Double(after - before) / Double(members)
            }
            // Warm up with a message everyone gets, then time reads of it one after another.
            let sent = try await client.expect(201, .POST, "/v1/chats/fanout/messages", as: key, body: ["senderId": "f0", "text": "hello all"])
            try await self.waitForArrivals(of: "message.created", count: members, in: arrivals)
            for reader in users.dropFirst().prefix(5) {
                arrivals.withLockedValue { $0["receipt.read"] = nil }
                let start = ContinuousClock.now
                try await client.expect(200, .POST, "/v1/chats/fanout/read", as: key, body: ["userId": reader, "messageIds": [sent["id"] as! String]])
                let last = try await self.waitForArrivals(of: "receipt.read", count: members, in: arrivals)
                fanOutMilliseconds.append(Double((last - start) / .microseconds(1)) / 1000)
            }
            group.cancelAll()
        }
        results.add("fan-out: one read to \(members) WebSockets", unit: "ms", samples: fanOutMilliseconds, target: "≤ 100 (1,000)",
                    note: "until the last socket has it")
        results.add("memory per idle WebSocket", unit: "KiB", value: perConnectionKiB, target: "≤ 64",
                    note: perConnectionKiB.isNaN ? "service not started by the bench" : "RSS growth / \(members)")
    }

    /// Waits until `count` events of `type` arrived; returns when the last one did.
    @discardableResult
    private func waitForArrivals(
        of type: String, count: Int, in arrivals: NIOLockedValueBox<[String: [ContinuousClock.Instant]]>
    ) async throws -> ContinuousClock.Instant {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if let times = arrivals.withLockedValue({ $0[type] }), times.count >= count { return times.max()! }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw BenchFailure("only \(arrivals.withLockedValue { $0[type]?.count ?? 0 }) of \(count) sockets got \(type)")
    }

    /// The resident memory of the service the bench started, from /proc (Linux).
    func serviceMemoryKiB() -> Int? {
        guard let pid = self.servicePID,
            let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }

    /// The `type` of an event as the service writes it (compact JSON, `"type":"…"`), found
    /// without parsing the whole event: a thousand sockets' worth of parsing would run on
    /// the same two cores as the fan-out it measures.
    static func eventType(of json: String) -> String? {
        let marker = #""type":""#
        guard let start = json.range(of: marker)?.upperBound, let end = json[start...].firstIndex(of: "\"") else { return nil }
        return String(json[start..<end])
    }
}
