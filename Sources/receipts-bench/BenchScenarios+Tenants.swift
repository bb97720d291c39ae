import Foundation
import NIOHTTP1
import Postgres

extension BenchScenarios {
    // MARK: - Cost flat with a chat's history, among many tenants

    /// Whether a request costs the same in a chat of 10,000 messages as in one of 10, in a
    /// database shaped like production's: a thousand other tenants with a few small chats
    /// each, whose chat ids recur in every tenant, so the planner's statistics say what they
    /// say in a real multi-tenant database (a chat id alone matches rows of many tenants).
    /// There, and not in a database of one tenant, a read once took 20 s in a chat of 10,000
    /// unread messages.
    ///
    /// In the bench's tenant: "backlog" (10,000 messages from the author, all unread by its
    /// reader) and "small" (10), each with a reader of its own so that their unread counts
    /// are apart. Each request type 50 times a chat, the chats taking turns; a row a type,
    /// p50 in "backlog" ÷ p50 in "small". The sends come first and give the marks and the
    /// single reads their messages: a different one each time, at the top of its chat, new
    /// work in both chats alike (so "small" holds 60 messages by then, and its page of 50 is
    /// full like the other's). Reads by id leave the first message unread: the backlog's
    /// reader keeps their 10,000 unread to the end, as the figure wants.
    func historyCost(into results: inout BenchResults) async throws {
        try await self.addOtherTenants(self.count(1000, minimum: 20))
        let backlog = HistoryChat(name: "backlog", reader: "backlog-reader", history: self.count(10_000, minimum: 200))
        let small = HistoryChat(name: "small", reader: "small-reader", history: 10)
        for chat in [backlog, small] {
            try await self.client.expect(201, .PUT, "/v1/chats/\(chat.name)", as: self.tenant.apiKey,
                                         body: ["kind": "direct", "members": [HistoryChat.author, chat.reader]])
            try await self.insertMessages(chat: chat.name, sender: HistoryChat.author, count: chat.history)
        }
        try await self.settleDatabase()
        try await self.database.pool.withConnection {
            _ = try await $0.executeScript(
                "ANALYZE receipts.tenants, receipts.api_keys, receipts.audience_periods, receipts.mentions, receipts.threads")
        }

        let sizes = "(\(Self.grouped(backlog.history)) ÷ \(Self.grouped(small.history)) messages)"
        for request in Self.historyRequests {
            let latencies = try await self.timedInTurns(request, backlog: backlog, small: small, samples: 50)
            let backlogP50 = BenchResults.median(latencies.backlog)
            let smallP50 = BenchResults.median(latencies.small)
            results.add("history cost: \(request.name) \(sizes)", unit: "×", value: backlogP50 / smallP50, target: "≤ 1.5",
                        note: String(format: "p50 %.2f ÷ %.2f ms; n=%d each", backlogP50, smallP50, latencies.small.count))
        }
    }

    /// A chat of `historyCost`: its reader, and how many messages it holds before the
    /// measured sends.
    private struct HistoryChat {
        /// The sender of every message, and the viewer of the reads of messages.
        static let author = "author"

        let name: String
        let reader: String
        let history: Int

        /// The id of the n-th message the measured sends add.
        func sent(_ n: Int) -> String { "\(self.name)-sent-\(n)" }
    }

    /// One request type of `historyCost`: what it sends for the n-th sample in a chat, and
    /// whether its answer is the right one.
    private struct HistoryRequest {
        let name: String
        let method: HTTPMethod
        let status: Int
        let path: (HistoryChat, Int) -> String
        var body: ((HistoryChat, Int) -> [String: Any])? = nil
        let isRight: (HistoryChat, Int, [String: Any]) -> Bool
    }

    /// The request types, in the order they run: the sends first (the later requests mark
    /// and read what they sent), the unread counts last (after every read).
    private static var historyRequests: [HistoryRequest] {
        [
            HistoryRequest(
                name: "send a message", method: .POST, status: 201,
                path: { chat, _ in "/v1/chats/\(chat.name)/messages" },
                body: { chat, n in ["id": chat.sent(n), "senderId": HistoryChat.author, "text": "benchmark"] },
                isRight: { chat, n, answer in answer["id"] as? String == chat.sent(n) }),
            HistoryRequest(
                name: "mark one message delivered", method: .POST, status: 200,
                path: { chat, _ in "/v1/chats/\(chat.name)/delivered" },
                body: { chat, n in ["userId": chat.reader, "messageIds": [chat.sent(n)]] },
                isRight: { _, _, answer in answer["marked"] as? Int == 1 }),
            HistoryRequest(
                name: "mark one message read", method: .POST, status: 200,
                path: { chat, _ in "/v1/chats/\(chat.name)/read" },
                body: { chat, n in ["userId": chat.reader, "messageIds": [chat.sent(n)]] },
                isRight: { _, _, answer in answer["marked"] as? Int == 1 }),
            HistoryRequest(
                name: "GET a page of 50", method: .GET, status: 200,
                path: { chat, _ in "/v1/chats/\(chat.name)/messages?viewer=\(HistoryChat.author)&limit=50" },
                isRight: { _, _, answer in (answer["messages"] as? [Any])?.count == 50 }),
            HistoryRequest(
                name: "GET one message", method: .GET, status: 200,
                path: { chat, n in "/v1/chats/\(chat.name)/messages/\(chat.sent(n))?viewer=\(HistoryChat.author)" },
                isRight: { chat, n, answer in answer["id"] as? String == chat.sent(n) }),
            // Every sent message is read by now: what is unread is the chat's history.
            HistoryRequest(
                name: "GET the reader's unread counts", method: .GET, status: 200,
                path: { chat, _ in "/v1/users/\(chat.reader)/unread" },
                isRight: { chat, _, answer in answer["total"] as? Int == chat.history }),
        ]
    }

    /// Sends `request` `samples` times in each chat, one at a time, the chats taking turns
    /// (and turns at going first), so that the VM's drift hits both alike. Each is timed up
    /// to its whole answer; checking the answer is the client's cost, after the clock.
    /// Milliseconds, per chat.
    private func timedInTurns(
        _ request: HistoryRequest, backlog: HistoryChat, small: HistoryChat, samples: Int
    ) async throws -> (backlog: [Double], small: [Double]) {
        var latencies: [String: [Double]] = [:]
        for n in 0..<samples {
            for chat in n.isMultiple(of: 2) ? [backlog, small] : [small, backlog] {
                let path = request.path(chat, n)
                let start = ContinuousClock.now
                let (status, data) = try await self.client.send(request.method, path, as: self.tenant.apiKey, body: request.body?(chat, n))
                latencies[chat.name, default: []].append(Double((ContinuousClock.now - start) / .microseconds(1)) / 1000)
                let answer = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
                guard status == request.status, request.isRight(chat, n, answer) else {
                    throw BenchFailure("\(request.method) \(path): \(status), not the answer expected: \(String(decoding: data.prefix(300), as: UTF8.self))")
                }
            }
        }
        return (latencies[backlog.name] ?? [], latencies[small.name] ?? [])
    }

    /// `count` other tenants, straight through the SQL functions (setup, not measured), each
    /// with direct chats c1…c5 of three messages: the same chat, user and message ids in
    /// every tenant, as apps' ids often are alike. Each gets an API key hash and a token
    /// secret that nobody uses.
    private func addOtherTenants(_ count: Int) async throws {
        try await self.database.pool.query(
            """
            SELECT receipts.create_tenant('bench-other-' || g, 'other tenant ' || g,
                                          sha256(convert_to('key of bench-other-' || g, 'UTF8')),
                                          sha256(convert_to('secret of bench-other-' || g, 'UTF8')))
            FROM generate_series(1, $1::int) AS g
            """,
            [count])
        try await self.database.pool.query(
            """
            SELECT receipts.put_chat('bench-other-' || g, 'c' || c, 'direct', ARRAY['u' || c, 'v' || c])
            FROM generate_series(1, $1::int) AS g, generate_series(1, 5) AS c
            """,
            [count])
        try await self.database.pool.query(
            """
            SELECT receipts.send_message('bench-other-' || g, 'c' || c, 'm' || m, 'u' || c, 'hello')
            FROM generate_series(1, $1::int) AS g, generate_series(1, 5) AS c, generate_series(1, 3) AS m
            """,
            [count])
    }

    /// `10000` as "10,000", as BENCHMARKS.md writes counts.
    private static func grouped(_ number: Int) -> String {
        let digits = Array(String(number))
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index).isMultiple(of: 3) { text.append(",") }
            text.append(digit)
        }
        return text
    }
}
