import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdWSClient
import NIOCore
import NIOHTTP1
import NIOWebSocket
import Postgres
import TestSupport
import Testing

/// docs/api.md, "Deleting, erasing and credentials": erasing users and tenants, through HTTP,
/// with streams open, and across a `kill -9`.
@Suite("Erasing users and tenants")
struct ErasureTests {
    @Test("erasing a user: at once out of every chat, no recipient, tokens and streams stopped; then their receipts and events are gone, user.erased to the tenant key")
    func eraseUser() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g1", members: ["a", "b", "c"])
            try await tenant.createChat("g2", members: ["a", "b"])
            let fromB = try await tenant.send(in: "g1", from: "b")
            let fromA = try await tenant.send(in: "g1", from: "a")
            let inG2 = try await tenant.send(in: "g2", from: "b")
            // A resume point before the reads, for the tenant key's stream.
            let resumeFrom = try await Self.newestEventId(tenant: tenant.id)
            try await tenant.read(in: "g1", by: "a")
            try await tenant.read(in: "g1", by: "c")
            try await tenant.deliver(in: "g2", to: "a")
            let token = try await tenant.token(for: "a")
            #expect(try await tenant.message(fromB, in: "g1", viewer: "b").receipt?.recipients == 2)

            let userStream = Task { try await WebSocketProbe.closeFrame(port: client.port, credential: token, within: .seconds(10)) }
            try await Task.sleep(for: .milliseconds(200))
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { all, _ in
                let erased = try await client.request(.delete, "/v1/users/a", as: tenant.apiKey)
                #expect(erased.status == .accepted)
                #expect(erased.json["userId"] as? String == "a")
                #expect(erased.json["erasure"] as? String == "pending")

                // At once: out of every chat, no recipient, their token refused.
                #expect(try await client.request(.get, "/v1/chats/g1", as: token).status == .unauthorized)
                let chat = try await client.request(.get, "/v1/chats/g1", as: tenant.apiKey)
                #expect((try chat.decode(TestChat.self)).members.map(\.userId) == ["b", "c"])
                let receipt = try await tenant.message(fromB, in: "g1", viewer: "b").receipt
                #expect(receipt?.recipients == 1)
                #expect(receipt?.read == 1)
                #expect(try await tenant.message(inG2, in: "g2", viewer: "b").receipt?.recipients == 0)
                #expect(try await tenant.unread(for: "a").total == 0)

                // Then: done, announced to the tenant key.
                let done = await Self.nextEvent(of: "user.erased", in: &all)
                #expect(done?["userId"] as? String == "a")
                #expect(done?["chatId"] == nil)
            }
            let closed = try await userStream.value
            #expect(closed?.closeCode == .policyViolation)

            let status = try await client.request(.get, "/v1/users/a/erasure", as: tenant.apiKey)
            #expect(status.status == .ok)
            #expect(status.json["erasure"] as? String == "done")
            #expect(status.json["requestedAt"] as? String != nil)
            #expect(try await client.request(.get, "/v1/users/b/erasure", as: tenant.apiKey).status == .notFound)
            // Their reads and deliveries are gone from every message; others' stay; their own message stays.
            let messages = try await tenant.messages(in: "g1", viewer: "b")
            #expect(messages.map(\.id) == [fromB, fromA])
            #expect(messages.first?.readBy == ["c"])
            #expect(messages.allSatisfy { !$0.readBy.contains("a") && !$0.deliveredTo.contains("a") })
            #expect(try await tenant.messages(in: "g2", viewer: "b").first?.deliveredTo == [])
            #expect(try await Self.rows(tenant: tenant.id, "SELECT count(*) FROM receipts.events WHERE tenant_id = $1 AND user_id = 'a' AND type <> 'user.erased'") == 0)
            #expect(try await Self.rows(tenant: tenant.id, "SELECT count(*) FROM receipts.events WHERE tenant_id = $1 AND user_id = 'c'") > 0)

            // A stream resuming from before replays everything else, nothing of theirs.
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey, after: resumeFrom) { replay, _ in
                let events = await replay.take(3, within: .seconds(5))
                // c's read and its unread.changed, then user.erased: nothing of a's in between.
                #expect(events.map { $0["type"] as? String } == ["receipt.read", "unread.changed", "user.erased"])
                #expect(events.first?["userId"] as? String == "c")
                #expect(events.allSatisfy { $0["userId"] as? String != "a" || $0["type"] as? String == "user.erased" })
            }

            // The same id comes back as a new user: no history, new receipts kept.
            #expect(try await client.request(.post, "/v1/chats/g1/members", as: tenant.apiKey, json: ["userId": "a"]).status == .ok)
            #expect(try await tenant.unread(for: "a").total == 0)
            let fresh = try await tenant.send(in: "g1", from: "b")
            #expect(try await tenant.read(in: "g1", by: "a").marked == 1)
            #expect(try await tenant.message(fresh, in: "g1", viewer: "b").readBy.contains("a"))
            #expect(try await client.request(.get, "/v1/chats/g1", as: try await tenant.token(for: "a")).status == .ok)
        }
    }

    @Test("?messages=delete deletes what they sent too, and others' counts drop")
    func eraseWithMessages() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            for _ in 0..<3 { try await tenant.send(in: "g", from: "a") }
            let kept = try await tenant.send(in: "g", from: "b")
            #expect(try await tenant.unread(for: "b").total == 3)
            #expect(try await client.request(.delete, "/v1/users/a?messages=nonsense", as: tenant.apiKey).status == .badRequest)
            #expect(try await client.request(.delete, "/v1/users/a", as: try await tenant.token(for: "a")).status == .forbidden)
            #expect(try await client.request(.delete, "/v1/users/a?messages=delete", as: tenant.apiKey).status == .accepted)
            try await Self.waitUntilDone(user: "a", tenant: tenant, client: client)
            #expect(try await tenant.messages(in: "g", viewer: "b").map(\.id) == [kept])
            #expect(try await tenant.unread(for: "b").total == 0)
        }
    }

    @Test("erasing a tenant: its keys and tokens stop at once, all its rows go")
    func eraseTenant() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let other = try await client.createTenant(name: "other")
            try await tenant.createChat("g", members: ["a", "b"])
            try await other.createChat("g", members: ["a", "b"])
            for _ in 0..<5 {
                try await tenant.send(in: "g", from: "a")
                try await other.send(in: "g", from: "a")
            }
            let token = try await tenant.token(for: "b")
            let erased = try await client.request(.delete, "/admin/v1/tenants/\(tenant.id)", as: TestService.adminToken)
            #expect(erased.status == .accepted)
            #expect(erased.json["tenantId"] as? String == tenant.id)
            #expect(try await client.request(.get, "/v1/chats/g", as: tenant.apiKey).status == .unauthorized)
            #expect(try await client.request(.get, "/v1/chats/g", as: token).status == .unauthorized)
            // Under erasure (or gone) the tenant has no credentials to list, add or rotate.
            let admin = TestService.adminToken
            #expect(try await client.request(.get, "/admin/v1/tenants/\(tenant.id)/keys", as: admin).status == .notFound)
            #expect(try await client.request(.post, "/admin/v1/tenants/\(tenant.id)/keys", as: admin).status == .notFound)
            #expect(try await client.request(.delete, "/admin/v1/tenants/\(tenant.id)/keys/key_x", as: admin).status == .notFound)
            #expect(try await client.request(.post, "/admin/v1/tenants/\(tenant.id)/token-secret/rotate", as: admin).status == .notFound)
            #expect(try await client.request(.delete, "/admin/v1/tenants/nobody", as: TestService.adminToken).status == .notFound)
            let deadline = ContinuousClock.now + .seconds(20)
            var left = -1
            while ContinuousClock.now < deadline {
                left = try await Self.rows(
                    tenant: tenant.id,
                    """
                    SELECT (SELECT count(*) FROM receipts.tenants WHERE tenant_id = $1) + (SELECT count(*) FROM receipts.messages WHERE tenant_id = $1)
                         + (SELECT count(*) FROM receipts.events WHERE tenant_id = $1) + (SELECT count(*) FROM receipts.chat_members WHERE tenant_id = $1)
                    """)
                if left == 0 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(left == 0)
            let again = try await client.request(.delete, "/admin/v1/tenants/\(tenant.id)", as: TestService.adminToken)
            #expect(again.status == .accepted)
            #expect(again.json["erasure"] as? String == "done")
            #expect(try await other.messages(in: "g", viewer: "a").count == 5)
        }
    }

    @Test("an erasure interrupted by kill -9 finishes after restart, nothing left, nothing else removed; the same id's new reads survive")
    func killedHalfway() async throws {
        try await TestDatabase.ensureMigrated()
        let adminToken = TestDatabase.uniqueName("admin")
        let environment = ["DATABASE_URL": TestDatabase.url, "RECEIPTS_ADMIN_TOKEN": adminToken, "LOG_LEVEL": "error"]
        let first = try await ReceiptsdProcess.start(arguments: ["--no-migrate"], environment: environment)
        defer { first.kill() }
        let tenant = TestDatabase.uniqueName("erase")
        try await TestDatabase.pool.query("SELECT receipts.create_tenant($1, 'erasure', $2, $3)", [tenant, PostgresBytes(Array(tenant.utf8)), PostgresBytes([1])])
        // 40 chats of 500 messages from b, all read by a and c: 40 steps of receipts.
        try await TestDatabase.pool.query(
            """
            SELECT receipts.put_chat($1, 'c' || n, 'group', ARRAY['a', 'b', 'c']) FROM generate_series(1, 40) AS n
            """, [tenant])
        // A statement per chat: a transaction that holds event ids for seconds would have every
        // event hub on the database (other tests' too) wait at its gap, and then give it up.
        for chat in 1...40 {
            try await TestDatabase.pool.query(
                "SELECT receipts.send_message($1, $2, 'm' || n, 'b', 'x') FROM generate_series(1, 500) AS n", [tenant, "c\(chat)"])
            for reader in ["a", "c"] {
                try await TestDatabase.pool.query("SELECT receipts.mark_read($1, $2, $3, NULL, NULL)", [tenant, "c\(chat)", reader])
            }
        }
        let cReadsBefore = try await Self.rows(tenant: tenant, Self.readsOf("c"))
        #expect(cReadsBefore == 20_000)

        var request = HTTPClientRequest(url: first.baseURL + "/v1/users/a")
        request.method = .DELETE
        request.headers.add(name: "Authorization", value: "Bearer \(try await Self.apiKey(tenant: tenant, adminToken: adminToken, at: first))")
        #expect(try await HTTPClient.shared.execute(request, timeout: .seconds(10)).status == .accepted)
        // The same id joins again at once and reads something new: never touched by the erasure.
        try await TestDatabase.pool.query("SELECT receipts.join_chat($1, 'c1', 'a')", [tenant])
        try await TestDatabase.pool.query("SELECT receipts.send_message($1, 'c1', 'new', 'b', 'x')", [tenant])
        try await TestDatabase.pool.query("SELECT receipts.mark_read($1, 'c1', 'a', NULL, NULL)", [tenant])

        // Halfway: some chats done, some not; then kill -9.
        let deadline = ContinuousClock.now + .seconds(30)
        var remaining = 40
        while ContinuousClock.now < deadline {
            remaining = try await Self.rows(tenant: tenant, "SELECT count(*) FROM receipts.erasure_chats WHERE tenant_id = $1")
            if remaining < 30 { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        first.kill()
        let left = try await Self.rows(tenant: tenant, "SELECT count(*) FROM receipts.erasure_chats WHERE tenant_id = $1")
        print("killed with \(left) of 40 chats left to erase")
        #expect(left > 0 && left < 40)

        let second = try await ReceiptsdProcess.start(arguments: ["--no-migrate"], environment: environment)
        defer { second.kill() }
        // The stopped holder's lease expires within 5 s; then the new instance finishes.
        let finishDeadline = ContinuousClock.now + .seconds(40)
        var done = false
        while ContinuousClock.now < finishDeadline, !done {
            done = try await Self.rows(tenant: tenant, "SELECT count(*) FROM receipts.erasures WHERE tenant_id = $1 AND done_at IS NOT NULL") == 1
            if !done { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(done)
        #expect(try await Self.rows(tenant: tenant, Self.readsOf("a")) == 1)  // the new user's read of 'new'
        #expect(try await Self.rows(tenant: tenant, Self.readsOf("c")) == cReadsBefore)
        #expect(try await Self.rows(tenant: tenant, "SELECT count(*) FROM receipts.events WHERE tenant_id = $1 AND user_id = 'a' AND type NOT IN ('user.erased')") >= 1)
        #expect(try await Self.rows(
            tenant: tenant,
            "SELECT count(*) FROM receipts.events WHERE tenant_id = $1 AND user_id = 'a' AND event_id <= (SELECT through_event_id FROM receipts.erasures WHERE tenant_id = $1 AND user_id = 'a')") == 0)
        #expect(try await Self.rows(tenant: tenant, "SELECT count(*) FROM receipts.messages WHERE tenant_id = $1") == 20_001)
    }

    /// Visible and hidden reads and deliveries of `user` in the tenant's receipt chunks.
    static func readsOf(_ user: String) -> String {
        "SELECT count(*) FROM receipts.receipt_chunks, unnest(read_by || hidden_read_by) AS reader WHERE tenant_id = $1 AND reader = '\(user)'"
    }

    /// A new API key of `tenant`, through the admin API of `instance`.
    static func apiKey(tenant: String, adminToken: String, at instance: ReceiptsdProcess) async throws -> String {
        var request = HTTPClientRequest(url: instance.baseURL + "/admin/v1/tenants/\(tenant)/keys")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(adminToken)")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 16)
        let json = try JSONSerialization.jsonObject(with: Data(String(buffer: body).utf8)) as? [String: Any]
        return try #require(json?["apiKey"] as? String)
    }

    static func waitUntilDone(user: String, tenant: TestTenant, client: APIClient) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let status = try await client.request(.get, "/v1/users/\(user)/erasure", as: tenant.apiKey)
            if status.json["erasure"] as? String == "done" { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("the erasure of \(user) was not done within 20 s")
    }

    static func nextEvent(of type: String, in reader: inout EventReader) async -> [String: Any]? {
        while let event = await reader.next(within: .seconds(20)) {
            if event["type"] as? String == type { return event }
        }
        return nil
    }

    static func newestEventId(tenant: String) async throws -> String {
        String(try await Self.rows(tenant: tenant, "SELECT coalesce(max(event_id), 0) FROM receipts.events WHERE tenant_id = $1"))
    }

    /// One count, seen as the tenant (row-level security scoped to it).
    static func rows(tenant: String, _ sql: String) async throws -> Int {
        try await TestDatabase.pool.withTransaction { connection in
            try await connection.execute("SELECT set_config('receipts.tenant_id', $1, true)", [tenant])
            return try await connection.query(sql, [tenant]).scalar(Int.self)
        }
    }
}
