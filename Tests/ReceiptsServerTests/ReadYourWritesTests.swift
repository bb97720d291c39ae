import Foundation
import HTTPTypes
import Postgres
import TestSupport
import Testing

@testable import ReceiptsServer

/// `Receipts-Consistency-Token` and `Receipts-Read-Source` on one PostgreSQL (no standby):
/// tokens on every write's answer, malformed ones refused, and reads answered by the primary
/// when no standby may serve them. The standbys themselves: `ReplicaReadTests` (Patroni).
struct ReadYourWritesTests {
    static let token = HTTPField.Name("Receipts-Consistency-Token")!
    static let source = HTTPField.Name("Receipts-Read-Source")!

    @Test("every 2xx write answers with a token, newer after each write; a refused write with none")
    func writesCarryTokens() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let created = try await tenant.createChat("c", members: ["a", "b"])
            let sent = try await client.request(.post, "/v1/chats/c/messages", as: tenant.apiKey, json: ["senderId": "a", "text": "hi", "id": "m1"])
            let read = try await client.request(.post, "/v1/chats/c/read", as: tenant.apiKey, json: ["userId": "b"])
            let settings = try await client.request(.put, "/v1/users/b/settings", as: tenant.apiKey, json: ["readReceipts": true])
            let deleted = try await client.request(.delete, "/v1/chats/c/messages/m1", as: tenant.apiKey)
            let tokens = try [created, sent, read, settings, deleted].map { answer in
                let token = try #require(answer.headers[Self.token], "\(answer.status) \(answer.body)")
                #expect(ConsistencyToken(token) != nil, "\(token) is in the documented form")
                return try #require(ConsistencyToken(token)).position
            }
            #expect(tokens == tokens.sorted(), "each write's token is at least the one before")
            #expect(deleted.status == .noContent)

            let refused = try await client.request(.post, "/v1/chats/nope/messages", as: tenant.apiKey, json: ["senderId": "a", "text": "x"])
            #expect(refused.status == .notFound)
            #expect(refused.headers[Self.token] == nil)
        }
    }

    @Test("a token is r1. and 16 upper-case hexadecimal digits; anything else is not one")
    func tokenForm() throws {
        let token = ConsistencyToken(WALPosition(offset: 0x3_E9C1_AD80))
        #expect(token.description == "r1.00000003E9C1AD80")
        #expect(ConsistencyToken("r1.00000003E9C1AD80") == token)
        for malformed in ["", "r1.", "r1.00000003e9c1ad80", "r2.00000003E9C1AD80", "r1.0000003E9C1AD80", "r1.00000003E9C1AD800", "x1.00000003E9C1AD80", "r1.00000003E9C1AD8G", "3/E9C1AD80"] {
            #expect(ConsistencyToken(malformed) == nil, "\(malformed)")
        }
    }

    @Test("a malformed token is 400 invalid_request, on a read and on a write, and the write changes nothing")
    func malformedToken() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("c", members: ["a", "b"])
            var headers = HTTPFields()
            headers[Self.token] = "not-a-token"
            let read = try await client.request(.get, "/v1/users/a/unread", as: tenant.apiKey, headers: headers)
            #expect(read.status == .badRequest)
            #expect(read.body.contains(#""code":"invalid_request""#))
            headers[.contentType] = "application/json"
            let write = try await client.request(
                .post, "/v1/chats/c/messages", as: tenant.apiKey, body: #"{"senderId":"a","text":"hi","id":"m1"}"#, headers: headers)
            #expect(write.status == .badRequest)
            #expect(write.body.contains(#""code":"invalid_request""#))
            let page = try await client.request(.get, "/v1/chats/c/messages", as: tenant.apiKey)
            #expect(page.status == .ok)
            #expect(!page.body.contains("m1"), "the refused send left nothing: \(page.body)")
        }
    }

    @Test("without standbys the four reads say primary, with or without a token (even one from ahead)")
    func readsFromThePrimary() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("c", members: ["a", "b"])
            let id = try await tenant.send(in: "c", from: "a")
            var ahead = HTTPFields()
            ahead[Self.token] = "r1.7FFFFFFFFFFFFFFF"
            for headers in [HTTPFields(), ahead] {
                for path in ["/v1/users/b/unread", "/v1/chats/c", "/v1/chats/c/messages?viewer=a", "/v1/chats/c/messages/\(id)?viewer=a"] {
                    let answer = try await client.request(.get, path, as: tenant.apiKey, headers: headers)
                    #expect(answer.status == .ok, "\(path): \(answer.body)")
                    #expect(answer.headers[Self.source] == "primary", "\(path)")
                }
            }
            // Other reads are no business of standbys: no header.
            #expect(try await client.request(.get, "/v1/settings", as: tenant.apiKey).headers[Self.source] == nil)
        }
    }

    @Test("standbys that are not standbys (the primary itself, a closed port) serve nothing: reads go to the primary, never 5xx")
    func unusableStandbys() async throws {
        let primary = try #require(try PostgresConfiguration(connectionString: TestDatabase.url).eachHost().first).configuration.connectionString
        for replicas in [primary, "postgresql://receipts@127.0.0.1:1/receipts?connect_timeout=2"] {
            try await TestService.run(configure: { $0.replicas.databaseURL = replicas }) { client in
                let tenant = try await client.createTenant()
                let chat = try await tenant.createChat("c", members: ["a", "b"])
                let id = try await tenant.send(in: "c", from: "a")
                var headers = HTTPFields()
                headers[Self.token] = try #require(chat.headers[Self.token])
                for path in ["/v1/users/b/unread", "/v1/chats/c", "/v1/chats/c/messages?viewer=b", "/v1/chats/c/messages/\(id)?viewer=a"] {
                    let answer = try await client.request(.get, path, as: tenant.apiKey, headers: headers)
                    #expect(answer.status == .ok, "\(path): \(answer.body)")
                    #expect(answer.headers[Self.source] == "primary")
                }
                let unread = try await client.request(.get, "/v1/users/b/unread", as: tenant.apiKey)
                #expect(unread.body.contains(#""unreadCount":1"#), "the send shows: \(unread.body)")
                let metrics = try await client.request(.get, "/metrics", as: nil).body
                #expect(metrics.contains(#"receipts_reads_total{source="primary"}"#))
                #expect(metrics.contains("receipts_replica_usable{server="), "a line per standby: \(metrics.prefix(200))")
            }
        }
    }

    @Test("a user's own writes bind reads about them for the window, and then no longer")
    func recentWritesWindow() async throws {
        let writes = RecentWrites(window: .milliseconds(200))
        writes.record(WALPosition(offset: 10), tenant: "t", users: ["a", "b"])
        writes.record(WALPosition(offset: 5), tenant: "t", users: ["a"])
        #expect(writes.position(tenant: "t", user: "a") == WALPosition(offset: 10), "the newest position stays")
        #expect(writes.position(tenant: "t", user: "b") == WALPosition(offset: 10))
        #expect(writes.position(tenant: "u", user: "a") == nil, "tenants apart")
        // Timing is the point here: the window ends.
        try await Task.sleep(for: .milliseconds(450))
        #expect(writes.position(tenant: "t", user: "a") == nil)
    }

    @Test("the window's memory is bounded: a full generation makes room")
    func recentWritesBounded() {
        let writes = RecentWrites(window: .seconds(60), capacity: 2)
        for user in 0..<10 {
            writes.record(WALPosition(offset: UInt64(user)), tenant: "t", users: ["u\(user)"])
        }
        let kept = (0..<10).filter { writes.position(tenant: "t", user: "u\($0)") != nil }
        #expect(kept.count <= 4)
        #expect(kept.contains(9), "the newest write is kept")
    }
}
