import Foundation
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#endif

extension BenchScenarios {
    /// The realtime edge at scale: N tenant-key WebSockets (or Server-Sent Events streams) open
    /// at once, from several loopback addresses. For each N: handshakes a second, the service's
    /// memory per idle stream, its CPU per idle stream per second, and one read's arrival on
    /// every stream (first, p50, p99, last; the service's CPU per stream per event).
    func streamsAtScale(_ kind: StreamProbes.Kind, into results: inout BenchResults) async throws {
        let counts = self.streamCounts ?? [self.count(1000, minimum: 20), self.count(10_000, minimum: 50)]
        guard let url = URL(string: self.client.baseURL), let host = url.host, let port = url.port else {
            throw BenchFailure("the service URL has no host and port")
        }
        let key = self.tenant.apiKey
        // Created once a run: the WebSocket and SSE scenarios share it.
        let (status, _) = try await self.client.send(.PUT, "/v1/chats/streams", as: key, body: ["kind": "direct", "members": ["sa", "sb"]])
        guard status == 201 || status == 200 else { throw BenchFailure("PUT /v1/chats/streams answered \(status)") }
        let sources = (1...8).map { "127.0.0.\($0)" }
        let idleSeconds = max(3, Int(30 * min(1, self.scale * 10)))
        var sample = 0
        for count in counts {
            let probes = StreamProbes(kind: kind)
            let memoryBefore = self.serviceMemoryKiB()
            // Opened 256 at a time, as a crowd of devices reconnecting would.
            let started = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<count {
                    if index >= 256 { try await group.next() }
                    group.addTask {
                        try await probes.open(host: host, port: port, source: sources[index % sources.count], credential: key)
                    }
                }
                try await group.waitForAll()
            }
            let handshakeSeconds = Self.seconds(ContinuousClock.now - started)
            try await Task.sleep(for: .seconds(1))
            var memoryPerStream: Double?
            if let before = memoryBefore, let after = self.serviceMemoryKiB() { memoryPerStream = Double(after - before) / Double(count) }

            // Idle: pings and whatever else the service does per stream.
            let idleStart = CPUTimes.now(servicePID: self.servicePID)
            try await Task.sleep(for: .seconds(idleSeconds))
            let idleEnd = CPUTimes.now(servicePID: self.servicePID)
            let idleMicroseconds = Self.serviceCPU(from: idleStart, to: idleEnd).map { $0 / Double(count) / Double(idleSeconds) * 1_000_000 }

            // One read, five times: until every stream has it.
            var lasts: [Double] = []
            var arrivals: [Double] = []
            let eventsStart = CPUTimes.now(servicePID: self.servicePID)
            for _ in 0..<5 {
                sample += 1
                let message = "probe-\(kind == .webSocket ? "ws" : "sse")-\(sample)"
                probes.expect([#""type":"message.created""#, message])
                try await self.client.expect(201, .POST, "/v1/chats/streams/messages", as: key, body: ["id": message, "senderId": "sa", "text": "hi"])
                try await Self.waitForArrivals(count, in: probes)
                probes.expect([#""type":"receipt.read""#, message])
                let start = ContinuousClock.now
                try await self.client.expect(200, .POST, "/v1/chats/streams/read", as: key, body: ["userId": "sb", "messageIds": [message]])
                let times = try await Self.waitForArrivals(count, in: probes).map { Self.seconds($0 - start) * 1000 }
                lasts.append(times.max() ?? .nan)
                arrivals += times
            }
            let eventsEnd = CPUTimes.now(servicePID: self.servicePID)
            // Two events a sample reach every stream (the message, then its read).
            let perDelivery = Self.serviceCPU(from: eventsStart, to: eventsEnd).map { $0 / Double(count * 10) * 1_000_000 }
            await probes.closeAll()

            let sorted = arrivals.sorted()
            func percentile(_ q: Double) -> Double { sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(q * Double(sorted.count)))] }
            let label = "\(count) " + (kind == .webSocket ? "WebSockets" : "SSE streams")
            results.add("streams, \(label): handshakes", unit: "per s", value: Double(count) / handshakeSeconds, target: "",
                        note: "256 in flight, from \(sources.count) loopback addresses")
            results.add("streams, \(label): memory per idle stream", unit: "KiB", value: memoryPerStream ?? .nan,
                        target: kind == .webSocket ? "≤ 12" : "≤ 16",
                        note: memoryPerStream == nil ? "service not started by the bench" : "RSS growth / \(count)")
            results.add("streams, \(label): idle CPU per stream", unit: "µs/s", value: idleMicroseconds ?? .nan, target: "≤ 2",
                        note: "service CPU over \(idleSeconds) s idle / streams / s")
            results.add("streams, \(label): one read to every stream, last", unit: "ms", samples: lasts,
                        target: count >= 19_000 ? "≤ 100" : count >= 10_000 ? "≤ 50" : "",
                        note: String(format: "first %.1f, p50 %.1f, p99 %.1f ms over 5 reads; service CPU %.1f µs a stream an event",
                                     sorted.first ?? .nan, percentile(0.5), percentile(0.99), perDelivery ?? .nan))
            // The service notices the closes on its own time; the next count starts clean.
            try await Task.sleep(for: .seconds(2))
        }
    }

    /// Waits until `count` streams got what `probes` awaits; returns the arrival times.
    @discardableResult
    private static func waitForArrivals(_ count: Int, in probes: StreamProbes) async throws -> [ContinuousClock.Instant] {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let times = probes.arrivalTimes
            if times.count >= count { return times }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw BenchFailure("only \(probes.arrivalTimes.count) of \(count) streams got the event (\(probes.openCount) open)")
    }

    /// The service's CPU seconds between two readings, when both were read.
    private static func serviceCPU(from start: CPUTimes?, to end: CPUTimes?) -> Double? {
        guard let start, let end else { return nil }
        return end.service - start.service
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration / .microseconds(1)) / 1_000_000
    }

    /// The most streams this machine lets the bench open to a service it started: the service's
    /// default connection cap (the open-file limit less its reserve; the two processes share
    /// the hard limit), less the bench's own HTTP connections and a margin.
    static func maximumStreams(databasePoolSize: Int) -> Int {
        let limit = raiseOpenFileLimit()
        let serviceCap = limit - (min(max(limit / 10, 64), 1024) + databasePoolSize)
        return max(1, min(serviceCap - 200, limit - 500))
    }

    /// Raises the bench's own soft open-file limit to the hard one; returns the limit in effect.
    @discardableResult
    static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }
}
