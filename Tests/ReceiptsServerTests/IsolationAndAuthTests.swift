import Foundation
import HTTPTypes
import Postgres
import ReceiptsStore
import TestSupport
import Testing

@Suite("Tenant isolation and credentials")
struct IsolationAndAuthTests {
    @Test("another tenant's chat is a 404 and stays unchanged")
    func tenantIsolation() async throws {
        try await TestService.run { client in
            let owner = try await client.createTenant(name: "owner")
            let intruder = try await client.createTenant(name: "intruder")
            try await owner.createChat("secret", members: ["a", "b"])
            let id = try await owner.send(in: "secret", from: "a")

            for (method, path, body) in [
                (HTTPMethodName.get, "/v1/chats/secret", nil),
                (.get, "/v1/chats/secret/messages", nil),
                (.get, "/v1/chats/secret/messages/\(id)", nil),
                (.post, "/v1/chats/secret/read", #"{"userId":"b"}"#),
                (.post, "/v1/chats/secret/delivered", #"{"userId":"b"}"#),
                (.post, "/v1/chats/secret/unread", #"{"userId":"b"}"#),
                (.post, "/v1/chats/secret/messages", #"{"senderId":"a","text":"boo"}"#),
                (.post, "/v1/chats/secret/members", #"{"userId":"x"}"#),
                (.delete, "/v1/chats/secret/members/a", nil),
            ] as [(HTTPMethodName, String, String?)] {
                let response = try await client.request(method.method, path, as: intruder.apiKey, body: body)
                #expect(response.status == .notFound, "\(path)")
                #expect(response.errorCode == "not_found", "\(path)")
            }
            // Creating the same chat id in the other tenant is a separate chat.
            try await intruder.createChat("secret", members: ["x", "y"])

            let message = try await owner.message(id, in: "secret", viewer: "a")
            #expect(message.readBy == [])
            #expect(message.deliveredTo == [])
            #expect(try await owner.messages(in: "secret", viewer: "a").count == 1)
            #expect(try await owner.unread(for: "b").count(in: "secret") == 1)
            #expect(try await intruder.unread(for: "b").total == 0)
        }
    }

    @Test("row-level security: the same queries without the tenant setting see no rows")
    func rowLevelSecurity() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            try await tenant.send(in: "g", from: "a")
        }
        var configuration = TestDatabase.configuration
        configuration.role = ReceiptsStore.serviceRole
        let connection = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
        for table in ["tenants", "users", "chats", "chat_members", "membership_periods", "messages", "events"] {
            // Table names are identifiers from the list above, not values.
            let count = try await connection.query("SELECT count(*) FROM receipts.\(table)", []).scalar(Int.self)
            #expect(count == 0, "receipts.\(table) without receipts.tenant_id")
        }
        // With a tenant set, the same role sees that tenant's rows and no other.
        let visible = try await connection.withTransaction { connection in
            try await connection.execute("SELECT receipts.enter_tenant($1)", ["no-such-tenant"])
            return try await connection.query("SELECT count(*) FROM receipts.messages").scalar(Int.self)
        }
        #expect(visible == 0)
        let bypass = await #expect(throws: PostgresError.self) {
            try await connection.execute("INSERT INTO receipts.chats (tenant_id, chat_id, kind) VALUES ('t', 'c', 'group')")
        }
        #expect(bypass?.sqlState != nil)
        await connection.close()
    }

    @Test("missing, wrong, expired and tampered credentials are 401")
    func unauthorized() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            for credential in [nil, "rk_wrong", "not-a-token", "a.b.c"] as [String?] {
                let response = try await client.request(.get, "/v1/chats/g", as: credential)
                #expect(response.status == .unauthorized)
                #expect(response.errorCode == "unauthorized")
            }
            let token = try await tenant.token(for: "a")
            var parts = token.split(separator: ".").map(String.init)
            parts[1] = String(parts[1].reversed())
            let tampered = try await client.request(.get, "/v1/chats/g", as: parts.joined(separator: "."))
            #expect(tampered.status == .unauthorized)

            let shortLived = try await tenant.token(for: "a", ttlSeconds: 1)
            try await Task.sleep(for: .milliseconds(2100))  // the point of this check is expiry
            let expired = try await client.request(.get, "/v1/chats/g", as: shortLived)
            #expect(expired.status == .unauthorized)
        }
    }

    @Test("a user token acts only as its own user, in its own chats, and never mints tokens")
    func userTokenLimits() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("mine", members: ["a", "b"])
            try await tenant.createChat("theirs", members: ["b", "c"])
            let token = try await tenant.token(for: "a")

            let tokenResponse = try await client.request(.post, "/v1/tokens", as: tenant.apiKey, json: ["userId": "a"])
            let minted = try tokenResponse.decode(TestToken.self)
            #expect(minted.expiresAt.hasSuffix("Z"))

            // Allowed: as itself, in its chat.
            #expect(try await client.request(.get, "/v1/chats/mine", as: token).status == .ok)
            let sent = try await client.request(.post, "/v1/chats/mine/messages", as: token, json: ["senderId": "a", "text": "hi"])
            #expect(sent.status == .created)
            #expect(try await client.request(.get, "/v1/chats/mine/messages", as: token).status == .ok)
            #expect(try await client.request(.get, "/v1/users/a/unread", as: token).status == .ok)

            // Forbidden: another user, another chat, tenant-key actions.
            let forbidden: [(HTTPMethodName, String, String?)] = [
                (.post, "/v1/chats/mine/messages", #"{"senderId":"b","text":"as b"}"#),
                (.post, "/v1/chats/mine/read", #"{"userId":"b"}"#),
                (.get, "/v1/chats/mine/messages?viewer=b", nil),
                (.get, "/v1/users/b/unread", nil),
                (.put, "/v1/users/b/settings", #"{"readReceipts":false}"#),
                (.delete, "/v1/chats/mine/members/b", nil),
                (.get, "/v1/chats/theirs", nil),
                (.post, "/v1/chats/theirs/read", #"{"userId":"a"}"#),
                (.post, "/v1/chats/theirs/messages", #"{"senderId":"a","text":"x"}"#),
                (.post, "/v1/tokens", #"{"userId":"a"}"#),
                (.put, "/v1/chats/new", #"{"kind":"group","members":["a"]}"#),
                (.post, "/v1/chats/mine/members", #"{"userId":"z"}"#),
            ]
            for (method, path, body) in forbidden {
                let response = try await client.request(method.method, path, as: token, body: body)
                #expect(response.status == .forbidden, "\(method) \(path): \(response.body)")
                #expect(response.errorCode == "forbidden")
            }
            // A user token never reaches /admin.
            let admin = try await client.request(.post, "/admin/v1/tenants", as: token, json: ["name": "x"])
            #expect(admin.status == .unauthorized)
            // A tenant key naming a non-member is 403.
            let nonMember = try await client.request(.post, "/v1/chats/mine/read", as: tenant.apiKey, json: ["userId": "c"])
            #expect(nonMember.status == .forbidden)
            #expect(try await tenant.messages(in: "mine", viewer: "a").count == 1)
        }
    }

    @Test("the admin API is 404 without RECEIPTS_ADMIN_TOKEN and 401 with a wrong token")
    func adminAccess() async throws {
        try await TestService.run(adminToken: nil) { client in
            let response = try await client.request(.post, "/admin/v1/tenants", as: "anything", json: ["name": "x"])
            #expect(response.status == .notFound)
            #expect(response.errorCode == "not_found")
        }
        try await TestService.run { client in
            let response = try await client.request(.post, "/admin/v1/tenants", as: "wrong", json: ["name": "x"])
            #expect(response.status == .unauthorized)
            let created = try await client.request(.post, "/admin/v1/tenants", as: TestService.adminToken, json: ["name": "Acme"])
            #expect(created.status == .created)
            let tenant = try created.decode(TestTenant.Created.self)
            #expect(tenant.name == "Acme")
            #expect(tenant.apiKey.hasPrefix("rk_"))
            // Only a hash of the key is stored.
            let stored = try await TestDatabase.pool.query(
                "SELECT count(*) FROM receipts.api_keys WHERE tenant_id = $1 AND key_hash = sha256(convert_to($2, 'UTF8'))",
                [tenant.id, tenant.apiKey]
            ).scalar(Int.self)
            #expect(stored == 1)
            let plain = try await TestDatabase.pool.query(
                "SELECT count(*) FROM receipts.api_keys WHERE position(convert_to($1, 'UTF8') IN key_hash) > 0",
                [tenant.apiKey]
            ).scalar(Int.self)
            #expect(plain == 0)
        }
    }
}

/// HTTP methods as plain values for test tables.
enum HTTPMethodName {
    case get, post, put, delete

    var method: HTTPRequest.Method {
        switch self {
        case .get: .get
        case .post: .post
        case .put: .put
        case .delete: .delete
        }
    }
}
