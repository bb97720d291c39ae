import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1
import Postgres

/// docs/api.md, "Deleting, erasing and credentials": what deleting and erasing cost.
///
/// - deleting one message costs no more than two mark-reads (same clients, same chats);
/// - deleting a chat of 100,000 messages answers within 1 s, and its background purge slows
///   other chats' requests by no more than noise;
/// - erasing a user who read 100,000 messages in 1,000 chats finishes within 60 s while a
///   steady read workload in other chats keeps its p99 within 1.5× of the same workload
///   without erasure (same run).
extension BenchScenarios {
    // MARK: - Deleting one message

    /// Single-message mark-reads, then single-message deletes, by the same clients in the
    /// same kind of chats: requests per second and the per-request time of each.
    func deleteMessageCost(into results: inout BenchResults) async throws {
        let key = self.tenant.apiKey
        let perClient = self.count(2_000, minimum: 40) / self.concurrency + 1
        var chats: [String: [String]] = [:]
        for index in 0..<self.concurrency {
            let chat = "del\(index)"
            try await self.client.expect(201, .PUT, "/v1/chats/\(chat)", as: key, body: ["kind": "direct", "members": ["s\(index)", "r\(index)"]])
            try await self.insertMessages(chat: chat, sender: "s\(index)", count: perClient * 2)
            chats[chat] = (1...(perClient * 2)).map { "\(chat)-\($0)" }
        }
        try await self.settleDatabase()
        let client = self.client
        let chatList = chats
        // Marking the odd ones read (each request one message), then deleting the even ones.
        let reads = try await self.timedRequests(chats: chatList) { chat, index, ids in
            try await client.check(200, .POST, "/v1/chats/\(chat)/read", as: key, body: ["userId": "r\(index)", "messageIds": [ids[1]]])
        }
        let deletes = try await self.timedRequests(chats: chatList) { chat, _, ids in
            try await client.check(204, .DELETE, "/v1/chats/\(chat)/messages/\(ids[0])", as: key)
        }
        results.add("mark-read, one message per request (reference)", latencies: reads.latencies, target: "",
                    note: String(format: "%.0f requests/s; %@", reads.perSecond, reads.cost))
        results.add("delete one message", latencies: deletes.latencies, target: "≤ 2 mark-reads",
                    note: String(format: "%.0f requests/s, %.2f× the mark-read's time per request; %@",
                                 deletes.perSecond, reads.perSecond / deletes.perSecond, deletes.cost))
    }

    /// Runs `call` once per pair of messages of each chat, one client per chat; returns each
    /// request's time (ms), requests per second and the service's CPU per request.
    private func timedRequests(
        chats: [String: [String]], _ call: @escaping @Sendable (String, Int, [String]) async throws -> Void
    ) async throws -> (latencies: [Double], perSecond: Double, cost: String) {
        let cpu = CPUTimes.now(servicePID: self.servicePID)
        let start = ContinuousClock.now
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for (index, (chat, ids)) in chats.sorted(by: { $0.key < $1.key }).enumerated() {
                let number = Int(chat.dropFirst(3)) ?? index
                group.addTask {
                    var times: [Double] = []
                    for pair in stride(from: 0, to: ids.count - 1, by: 2) {
                        let started = ContinuousClock.now
                        try await call(chat, number, [ids[pair], ids[pair + 1]])
                        times.append(Double((ContinuousClock.now - started) / .microseconds(1)) / 1000)
                    }
                    return times
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let seconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
        return (latencies, Double(latencies.count) / seconds, CPUTimes.note(since: cpu, servicePID: self.servicePID, requests: latencies.count))
    }

    // MARK: - Deleting a large chat

    /// `DELETE /v1/chats/{id}` of a chat of 100,000 messages: the answer's time, then how
    /// long the purge takes, and other chats' read latency before and during it.
    func deleteLargeChat(into results: inout BenchResults) async throws {
        let key = self.tenant.apiKey
        let count = self.count(100_000, minimum: 1_000)
        try await self.client.expect(201, .PUT, "/v1/chats/huge", as: key, body: ["kind": "group", "members": ["hs", "hr1", "hr2"]])
        try await self.insertMessages(chat: "huge", sender: "hs", count: count)
        try await self.database.pool.query("SELECT receipts.mark_read($1, 'huge', 'hr1', NULL, NULL)", [self.tenant.id])
        let workload = try await SteadyReads(scenarios: self, prefix: "dchat", clients: 4, messagesPerClient: 3_000)
        try await self.settleDatabase()
        let before = try await workload.run(for: .seconds(3))

        let start = ContinuousClock.now
        try await self.client.check(204, .DELETE, "/v1/chats/huge", as: key)
        let answered = Double((ContinuousClock.now - start) / .microseconds(1)) / 1000
        let during = try await workload.run(until: {
            try await self.database.pool.query(
                "SELECT count(*) FROM receipts.chat_purges WHERE tenant_id = $1", [self.tenant.id]).scalar(Int.self) == 0
        }, atMost: .seconds(120))
        let purged = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
        results.add("delete a chat of \(count) messages: the answer", unit: "ms", value: answered, target: "≤ 1000",
                    note: String(format: "the rows purged in the background in %.1f s", purged))
        results.add("… other chats' mark-read without the purge", latencies: before, target: "")
        results.add("… and during it", latencies: during, target: "p99 within noise",
                    note: String(format: "n=%d; p99 %.2f× without", during.count, Self.p99(during) / Self.p99(before)))
    }

    // MARK: - Erasing a user

    /// Erases a user who read 100,000 messages in 1,000 chats, while a steady read workload
    /// runs in other chats; the same workload without erasure first, in the same run.
    func eraseUser(into results: inout BenchResults) async throws {
        let key = self.tenant.apiKey
        let chats = self.count(1_000, minimum: 20)
        let perChat = max(1, self.count(100_000, minimum: 1_000) / chats)
        try await self.database.pool.query(
            "SELECT receipts.put_chat($1, 'erase' || n, 'group', ARRAY['eraser', 'es' || n]) FROM generate_series(1, $2::int) AS n",
            [self.tenant.id, chats])
        try await self.database.pool.query(
            """
            SELECT receipts.send_message($1, 'erase' || chat, 'erase' || chat || '-' || n, 'es' || chat, 'benchmark')
            FROM generate_series(1, $2::int) AS chat, generate_series(1, $3::int) AS n
            """, [self.tenant.id, chats, perChat])
        try await self.database.pool.query(
            "SELECT receipts.mark_read($1, 'erase' || n, 'eraser', NULL, NULL) FROM generate_series(1, $2::int) AS n",
            [self.tenant.id, chats])
        let workload = try await SteadyReads(scenarios: self, prefix: "ework", clients: 4, messagesPerClient: 5_000)
        try await self.settleDatabase()
        let without = try await workload.run(for: .seconds(5))

        let start = ContinuousClock.now
        try await self.client.check(202, .DELETE, "/v1/users/eraser", as: key)
        let during = try await workload.run(until: {
            (try await self.client.expect(200, .GET, "/v1/users/eraser/erasure", as: key))["erasure"] as? String == "done"
        }, atMost: .seconds(300))
        let seconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
        results.add("erase a user who read \(chats * perChat) messages in \(chats) chats", unit: "s", value: seconds, target: "≤ 60")
        results.add("… steady mark-reads in other chats without erasure", latencies: without, target: "")
        results.add("… and during it", latencies: during, target: "p99 ≤ 1.5× without",
                    note: String(format: "n=%d; p99 %.2f× without", during.count, Self.p99(during) / Self.p99(without)))
    }

    static func p99(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(0.99 * Double(sorted.count)))]
    }
}

/// A steady read workload: `clients` readers, each marking its own direct chat's messages
/// read one request at a time, one after another, with a short pause between requests (a
/// steady rate, not a saturating one). Each `run` goes on where the last one stopped.
final class SteadyReads: Sendable {
    let scenarios: BenchScenarios
    let prefix: String
    let clients: Int
    private let next = NIOLockedValueBox([Int: Int]())
    let messagesPerClient: Int

    init(scenarios: BenchScenarios, prefix: String, clients: Int, messagesPerClient: Int) async throws {
        self.scenarios = scenarios
        self.prefix = prefix
        self.clients = clients
        self.messagesPerClient = messagesPerClient
        for index in 0..<clients {
            let chat = "\(prefix)\(index)"
            try await scenarios.client.expect(
                201, .PUT, "/v1/chats/\(chat)", as: scenarios.tenant.apiKey, body: ["kind": "direct", "members": ["ws\(index)", "wr\(index)"]])
            try await scenarios.insertMessages(chat: chat, sender: "ws\(index)", count: messagesPerClient)
        }
    }

    /// Runs for `duration`; returns each request's time (ms).
    func run(for duration: Duration) async throws -> [Double] {
        let end = ContinuousClock.now + duration
        return try await self.run(until: { ContinuousClock.now >= end }, atMost: duration + .seconds(1))
    }

    /// Runs until `done` says so (asked every 100 ms) or `limit` passed; returns each
    /// request's time (ms).
    func run(until done: @escaping @Sendable () async throws -> Bool, atMost limit: Duration) async throws -> [Double] {
        let stop = NIOLockedValueBox(false)
        let deadline = ContinuousClock.now + limit
        let client = self.scenarios.client
        let key = self.scenarios.tenant.apiKey
        return try await withThrowingTaskGroup(of: [Double].self) { group in
            for index in 0..<self.clients {
                group.addTask {
                    var times: [Double] = []
                    while !stop.withLockedValue({ $0 }) {
                        let message = self.next.withLockedValue { next -> Int in
                            next[index, default: 0] += 1
                            return next[index]!
                        }
                        guard message <= self.messagesPerClient else { break }
                        let chat = "\(self.prefix)\(index)"
                        let started = ContinuousClock.now
                        try await client.check(200, .POST, "/v1/chats/\(chat)/read", as: key, body: ["userId": "wr\(index)", "messageIds": ["\(chat)-\(message)"]])
                        times.append(Double((ContinuousClock.now - started) / .microseconds(1)) / 1000)
                        try await Task.sleep(for: .milliseconds(5))
                    }
                    return times
                }
            }
            group.addTask {
                while ContinuousClock.now < deadline, !(try await done()) { try await Task.sleep(for: .milliseconds(100)) }
                stop.withLockedValue { $0 = true }
                return []
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
    }
}
