import Foundation
import NIOHTTP1
import Postgres

extension BenchScenarios {
    // MARK: - Threads and mentions

    /// Threads and mentions (docs/api.md, "Threads" and "Mentions"), each beside the figure it must stay near in the same
    /// run (`--only unread,readall,threads`):
    /// - the unread answer of a user in 1,000 chats, each with 10 threads that have an unread
    ///   reply (one in three mentions the user): against `unread`'s 1,000 plain chats;
    /// - a read of the main timeline of 10,000 messages, and of a thread of 10,000 replies,
    ///   in one chat that has both (interleaved): against `readall`'s 10,000.
    func threads(into results: inout BenchResults) async throws {
        try await self.unreadCountsWithThreads(into: &results)
        try await self.readsInThreads(into: &results)
    }

    private func unreadCountsWithThreads(into results: inout BenchResults) async throws {
        let chats = self.count(1000, minimum: 10)
        // Per chat: 10 roots and a reply to each, by the friend; every third reply mentions the user.
        try await self.database.pool.query(
            """
            SELECT receipts.put_chat($1, 'threaded-' || g, 'group', ARRAY['threads-user', 'friend-' || g])
            FROM generate_series(1, $2::int) AS g
            """,
            [self.tenant.id, chats])
        try await self.database.pool.query(
            """
            SELECT receipts.send_message($1, 'threaded-' || g, 'root-' || t, 'friend-' || g, 'root')
            FROM generate_series(1, $2::int) AS g, generate_series(1, 10) AS t
            """,
            [self.tenant.id, chats])
        try await self.database.pool.query(
            """
            SELECT receipts.send_each($1, ARRAY['threaded-' || g], ARRAY['reply-' || t], ARRAY['friend-' || g], ARRAY['reply'],
                                      NULL, CASE WHEN t % 3 = 0 THEN ARRAY[1] ELSE '{}' END,
                                      CASE WHEN t % 3 = 0 THEN ARRAY['threads-user'] ELSE '{}' END, ARRAY['root-' || t])
            FROM generate_series(1, $2::int) AS g, generate_series(1, 10) AS t
            """,
            [self.tenant.id, chats])
        try await self.settleDatabase()
        var latencies: [Double] = []
        for _ in 0..<50 {
            let start = ContinuousClock.now
            let (status, body) = try await self.client.send(.GET, "/v1/users/threads-user/unread", as: self.tenant.apiKey, body: nil)
            latencies.append(Double((ContinuousClock.now - start) / .microseconds(1)) / 1000)
            let answer = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
            let listed = answer["chats"] as? [[String: Any]] ?? []
            guard status == 200, answer["total"] as? Int == 20 * chats, answer["mentions"] as? Int == 3 * chats,
                listed.allSatisfy({ ($0["threads"] as? [Any])?.count == 10 })
            else { throw BenchFailure("unread with threads: \(status), total \(answer["total"] ?? "?"), mentions \(answer["mentions"] ?? "?")") }
        }
        results.add("unread counts, user in \(chats) chats with 10 threads each", latencies: latencies,
                    target: "p50 ≤ 1.5 × the plain chats'", note: "n=50; 20 unread a chat, 3 mentions, 10 threads listed")
    }

    private func readsInThreads(into results: inout BenchResults) async throws {
        let count = self.count(10_000, minimum: 100)
        var main: [Double] = []
        var thread: [Double] = []
        for index in 1...3 {
            let chat = "threadbig\(index)"
            try await self.client.expect(201, .PUT, "/v1/chats/\(chat)", as: self.tenant.apiKey, body: ["kind": "direct", "members": ["a", "b"]])
            try await self.database.pool.query("SELECT receipts.send_message($1, $2, 'root', 'a', 'root')", [self.tenant.id, chat])
            // Main timeline and replies interleaved: count of each after the root.
            try await self.database.pool.query(
                """
                SELECT receipts.send_each($1, ARRAY[$2], ARRAY[$2 || '-' || g], ARRAY['a'], ARRAY['benchmark'], NULL, NULL, NULL,
                                          ARRAY[CASE WHEN g % 2 = 0 THEN 'root' END])
                FROM generate_series(1, 2 * $3::int) AS g
                """,
                [self.tenant.id, chat, count])
        }
        try await self.settleDatabase()
        for index in 1...3 {
            let chat = "threadbig\(index)"
            for (scope, expected) in [("main", count + 1), ("root", count)] {
                let start = ContinuousClock.now
                let answer = try await self.client.expect(200, .POST, "/v1/chats/\(chat)/read", as: self.tenant.apiKey, body: ["userId": "b", "thread": scope])
                let milliseconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1000
                guard answer["marked"] as? Int == expected else {
                    throw BenchFailure("read of \(scope) marked \(answer["marked"] ?? "?"), not \(expected)")
                }
                if scope == "main" { main.append(milliseconds) } else { thread.append(milliseconds) }
            }
        }
        results.add("read of a main timeline of \(count + 1) (replies beside it)", unit: "ms", samples: main,
                    target: "≤ 1.5 × read-all of \(count)")
        results.add("read of a thread of \(count) replies", unit: "ms", samples: thread, target: "≤ 1.5 × read-all of \(count)")
    }
}
