import Foundation
import NIOHTTP1
import Postgres

extension BenchScenarios {
    /// The group sizes of the large-group figures at `--scale 1`; smaller scales
    /// shrink them (at least 10 members each).
    static let largeGroupSizes = [10, 100, 1_000, 5_000]

    /// Large groups: one group of N members, 50 messages from one member, then every other
    /// member reading all of them (`POST …/read {"userId"}`), one after another. Reports the
    /// read-all latency of the first and the last tenth of readers (a read must not cost more
    /// as the messages gather readers), what the tables storing receipts grew by, and the
    /// sender's views: one message with its N - 1 `recipients`, and the page of the 50; then
    /// the latency of a send into the group and of a read of one message by id.
    func largeGroups(into results: inout BenchResults) async throws {
        let sizes = self.groupSizes ?? Array(Set(Self.largeGroupSizes.map { self.count($0, minimum: 10) })).sorted()
        for members in sizes {
            try await self.largeGroup(of: members, into: &results)
        }
    }

    private func largeGroup(of size: Int, into results: inout BenchResults) async throws {
        let key = self.tenant.apiKey
        let chat = "large\(size)"
        let members = (0..<size).map { "\(chat)-u\($0)" }
        let sender = members[0]
        let messages = 50
        // Setup straight through the SQL functions (a PUT body of 5,000 members is not the figure).
        try await self.database.pool.query(
            "SELECT receipts.put_chat($1, $2, 'group', $3)", [self.tenant.id, chat, members])
        try await self.insertMessages(chat: chat, sender: sender, count: messages)
        try await self.settleDatabase()
        let storedBefore = try await self.receiptStorage()

        var latencies: [Double] = []
        for reader in members.dropFirst() {
            let start = ContinuousClock.now
            let answer = try await self.client.expect(200, .POST, "/v1/chats/\(chat)/read", as: key, body: ["userId": reader])
            latencies.append(Self.milliseconds(since: start))
            guard answer["marked"] as? Int == messages else { throw BenchFailure("\(reader) marked \(answer["marked"] ?? "?"), not \(messages)") }
        }
        let storedAfter = try await self.receiptStorage()
        // The views below are of the group at rest: autovacuum would otherwise start on the
        // read-alls' dead row versions in the middle of their measurement.
        try await self.settleDatabase()

        let tenth = max(1, latencies.count / 10)
        let first = Array(latencies.prefix(tenth))
        let last = Array(latencies.suffix(tenth))
        let ratio = Self.median(last) / Self.median(first)
        results.add("large group of \(size): read-all (50), first tenth of readers", latencies: first, target: "")
        results.add("large group of \(size): read-all (50), last tenth of readers", latencies: last, target: "≤ 1.5 × first tenth",
                    note: String(format: "n=%d; %.2f × the first tenth", last.count, ratio))
        let receipts = Double(messages * (size - 1))
        let grown = Double((storedAfter.messages + storedAfter.chunks) - (storedBefore.messages + storedBefore.chunks))
        results.add("large group of \(size): growth of messages + receipt_chunks", unit: "MiB", value: grown / 1_048_576,
                    target: size >= 1_000 ? "≤ 20 (1,000)" : "",
                    note: String(format: "%.0f bytes a receipt; messages +%.2f MiB, receipt_chunks +%.2f MiB",
                                 grown / receipts, Double(storedAfter.messages - storedBefore.messages) / 1_048_576,
                                 Double(storedAfter.chunks - storedBefore.chunks) / 1_048_576))
        let events = Double(storedAfter.events - storedBefore.events)
        results.add("large group of \(size): growth of events (the read-alls' receipt.read)", unit: "MiB", value: events / 1_048_576,
                    target: "", note: String(format: "%.0f bytes a read request, %.0f a receipt; with receipts: %.0f bytes a receipt",
                                             events / Double(size - 1), events / receipts, (grown + events) / receipts))

        let one = try await self.timedGets("/v1/chats/\(chat)/messages/\(chat)-1?viewer=\(sender)") { answer in
            (answer["recipients"] as? [Any])?.count == size - 1
        }
        results.add("large group of \(size): GET one message with \(size - 1) recipients", latencies: one.latencies, target: "≤ 20 (1,000)",
                    note: one.cpu)
        let page = try await self.timedGets("/v1/chats/\(chat)/messages?viewer=\(sender)&limit=50") { answer in
            let listed = answer["messages"] as? [[String: Any]] ?? []
            return listed.count == messages && listed.allSatisfy { ($0["receipt"] as? [String: Any])?["read"] as? Int == size - 1 }
        }
        results.add("large group of \(size): GET a page of 50 with receipt", latencies: page.latencies, target: "≤ 20 (1,000)", note: page.cpu)

        // Sends into the group (each creates the message's receipt chunk rows), one after another.
        var sends: [Double] = []
        let sendsStart = CPUTimes.now(servicePID: self.servicePID)
        for index in 0..<20 {
            let start = ContinuousClock.now
            _ = try await self.client.expect(
                201, .POST, "/v1/chats/\(chat)/messages", as: key,
                body: ["id": "\(chat)-sent-\(index)", "senderId": sender, "text": "benchmark"])
            sends.append(Self.milliseconds(since: start))
        }
        results.add("large group of \(size): send one message", latencies: sends, target: "",
                    note: CPUTimes.note(since: sendsStart, servicePID: self.servicePID, requests: sends.count))

        // One read of one message by id, by up to 200 members spread over the group's chunks.
        let readers = stride(from: 1, to: size, by: max(1, (size - 1) / 200)).prefix(200).map { members[$0] }
        var reads: [Double] = []
        let readsStart = CPUTimes.now(servicePID: self.servicePID)
        for reader in readers {
            let start = ContinuousClock.now
            let answer = try await self.client.expect(
                200, .POST, "/v1/chats/\(chat)/read", as: key, body: ["userId": reader, "messageIds": ["\(chat)-sent-19"]])
            reads.append(Self.milliseconds(since: start))
            guard answer["marked"] as? Int == 1 else { throw BenchFailure("\(reader) marked \(answer["marked"] ?? "?"), not 1") }
        }
        results.add("large group of \(size): read one message by id", latencies: reads, target: "",
                    note: CPUTimes.note(since: readsStart, servicePID: self.servicePID, requests: reads.count))
    }

    private static func milliseconds(since start: ContinuousClock.Instant) -> Double {
        Double((ContinuousClock.now - start) / .microseconds(1)) / 1000
    }

    /// Times 20 GETs of `path` (after 3 not timed), each up to its whole answer, with the CPU
    /// they took; checks the last answer.
    private func timedGets(_ path: String, check: ([String: Any]) -> Bool) async throws -> (latencies: [Double], cpu: String) {
        var latencies: [Double] = []
        var body = Data()
        var cpuStart: CPUTimes?
        for index in 0..<23 {
            if index == 3 { cpuStart = CPUTimes.now(servicePID: self.servicePID) }
            let start = ContinuousClock.now
            let (status, data) = try await self.client.send(.GET, path, as: self.tenant.apiKey, body: nil)
            if index >= 3 { latencies.append(Double((ContinuousClock.now - start) / .microseconds(1)) / 1000) }
            guard status == 200 else { throw BenchFailure("GET \(path): \(status)") }
            body = data
        }
        guard let answer = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any], check(answer) else {
            throw BenchFailure("GET \(path): not the receipts expected")
        }
        return (latencies, CPUTimes.note(since: cpuStart, servicePID: self.servicePID, requests: latencies.count))
    }

    /// Bytes on disk (with indexes and TOAST) of the tables that store receipts, and of the event log.
    private func receiptStorage() async throws -> (messages: Int64, chunks: Int64, events: Int64) {
        let row = try await self.database.pool.query(
            """
            SELECT pg_total_relation_size('receipts.messages')::int8, pg_total_relation_size('receipts.receipt_chunks')::int8,
                   pg_total_relation_size('receipts.events')::int8
            """, [])[0]
        return try row.decode((Int64, Int64, Int64).self)
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
    }
}
