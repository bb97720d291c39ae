import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOWebSocket
import HummingbirdWSClient
import TestSupport
import Testing

/// docs/api.md, "Deleting, erasing and credentials": API keys, token revocation, token-secret
/// rotation, through HTTP, on one instance and across two.
@Suite("Credentials")
struct CredentialTests {
    @Test("a tenant has 1-10 API keys: added (shown once), listed (never the key), removed; the last one too")
    func apiKeys() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let admin = TestService.adminToken
            let listed = try await client.request(.get, "/admin/v1/tenants/\(tenant.id)/keys", as: admin)
            #expect(listed.status == .ok)
            let firstKeys = listed.json["keys"] as? [[String: Any]] ?? []
            #expect(firstKeys.count == 1)
            #expect(Set(firstKeys.first?.keys.map { $0 } ?? []) == ["keyId", "createdAt", "lastUsedAt"])
            #expect(!listed.body.contains(tenant.apiKey))

            var added: [(keyId: String, apiKey: String)] = []
            for _ in 0..<9 {
                let response = try await client.request(.post, "/admin/v1/tenants/\(tenant.id)/keys", as: admin)
                #expect(response.status == .created)
                #expect(Set(response.json.keys) == ["keyId", "apiKey", "createdAt"])
                added.append((response.json["keyId"] as? String ?? "", response.json["apiKey"] as? String ?? ""))
            }
            let eleventh = try await client.request(.post, "/admin/v1/tenants/\(tenant.id)/keys", as: admin)
            #expect(eleventh.status == .conflict)
            #expect(eleventh.errorCode == "conflict")
            // Every key works, the new ones at once.
            for key in added.prefix(3) + [("", tenant.apiKey)] {
                #expect(try await client.request(.get, "/v1/users/a/unread", as: key.apiKey).status == .ok)
            }
            let all = try await client.request(.get, "/admin/v1/tenants/\(tenant.id)/keys", as: admin)
            #expect((all.json["keys"] as? [[String: Any]])?.count == 10)
            #expect(added.allSatisfy { !all.body.contains($0.apiKey) })

            // Removing one: 401 at once; again: 404; an unknown tenant: 404.
            let removed = try await client.request(.delete, "/admin/v1/tenants/\(tenant.id)/keys/\(added[0].keyId)", as: admin)
            #expect(removed.status == .noContent)
            #expect(try await client.request(.get, "/v1/users/a/unread", as: added[0].apiKey).status == .unauthorized)
            #expect(try await client.request(.delete, "/admin/v1/tenants/\(tenant.id)/keys/\(added[0].keyId)", as: admin).status == .notFound)
            #expect(try await client.request(.get, "/admin/v1/tenants/nobody/keys", as: admin).status == .notFound)
            #expect(try await client.request(.post, "/admin/v1/tenants/nobody/keys", as: admin).status == .notFound)
            #expect(try await client.request(.post, "/admin/v1/tenants/\(tenant.id)/keys", as: tenant.apiKey).status == .unauthorized)

            // Removing every key locks the tenant out until one is added.
            for key in (all.json["keys"] as? [[String: Any]] ?? []).compactMap({ $0["keyId"] as? String }) where key != added[0].keyId {
                #expect(try await client.request(.delete, "/admin/v1/tenants/\(tenant.id)/keys/\(key)", as: admin).status == .noContent)
            }
            #expect(try await client.request(.get, "/v1/users/a/unread", as: tenant.apiKey).status == .unauthorized)
            let none = try await client.request(.get, "/admin/v1/tenants/\(tenant.id)/keys", as: admin)
            #expect((none.json["keys"] as? [[String: Any]])?.isEmpty == true)
            let again = try await client.request(.post, "/admin/v1/tenants/\(tenant.id)/keys", as: admin)
            #expect(again.status == .created)
            #expect(try await client.request(.get, "/v1/users/a/unread", as: again.json["apiKey"] as? String).status == .ok)
        }
    }

    @Test("revoking a user's tokens refuses those issued up to then, at once; later ones and other users' work")
    func revokeTokens() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let old = try await tenant.token(for: "a")
            let other = try await tenant.token(for: "b")
            #expect(try await client.request(.get, "/v1/chats/g", as: old).status == .ok)
            // A user token cannot revoke, not even its own.
            #expect(try await client.request(.post, "/v1/users/a/tokens/revoke", as: old).status == .forbidden)

            let revoked = try await client.request(.post, "/v1/users/a/tokens/revoke", as: tenant.apiKey)
            #expect(revoked.status == .ok)
            #expect(revoked.json["userId"] as? String == "a")
            #expect((revoked.json["revokedBefore"] as? String)?.hasSuffix("Z") == true)
            let refused = try await client.request(.get, "/v1/chats/g", as: old)
            #expect(refused.status == .unauthorized)
            #expect(refused.errorCode == "unauthorized")
            #expect(try await client.request(.get, "/v1/chats/g", as: other).status == .ok)
            let fresh = try await tenant.token(for: "a")
            #expect(try await client.request(.get, "/v1/chats/g", as: fresh).status == .ok)
            #expect(try await client.request(.get, "/v1/chats/g", as: old).status == .unauthorized)
            #expect(try await client.request(.post, "/v1/users/bad%20id/tokens/revoke", as: tenant.apiKey).status == .badRequest)
        }
    }

    @Test("rotating the token secret keeps the previous one until the next rotation, which retires it at once")
    func rotateSecret() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let admin = TestService.adminToken
            let first = try await tenant.token(for: "a")
            let rotated = try await client.request(.post, "/admin/v1/tenants/\(tenant.id)/token-secret/rotate", as: admin)
            #expect(rotated.status == .ok)
            #expect(Set(rotated.json.keys) == ["rotatedAt"])
            let second = try await tenant.token(for: "a")
            #expect(second != first)
            #expect(try await client.request(.get, "/v1/chats/g", as: first).status == .ok)
            #expect(try await client.request(.get, "/v1/chats/g", as: second).status == .ok)

            // A second rotation retires the first secret at once: its token is refused and
            // the stream it opened ends.
            var ended = false
            try await StreamClients.withEventSource(port: client.port, credential: first) { stream in
                let rotatedAgain = try await client.request(.post, "/admin/v1/tenants/\(tenant.id)/token-secret/rotate", as: admin)
                #expect(rotatedAgain.status == .ok)
                ended = await stream.next(within: .seconds(3)) == nil
            }
            #expect(ended)
            let third = try await tenant.token(for: "a")
            #expect(try await client.request(.get, "/v1/chats/g", as: first).status == .unauthorized)
            #expect(try await client.request(.get, "/v1/chats/g", as: second).status == .ok)
            #expect(try await client.request(.get, "/v1/chats/g", as: third).status == .ok)
            #expect(try await client.request(.post, "/admin/v1/tenants/nobody/token-secret/rotate", as: admin).status == .notFound)
        }
    }

    @Test("two instances on one database: a key removed or tokens revoked through one answer 401 on the other within 1 s, and its streams close")
    func acrossInstances() async throws {
        try await TestDatabase.ensureMigrated()
        let other = try await ReceiptsdProcess.start(
            arguments: ["--no-migrate"], environment: ["DATABASE_URL": TestDatabase.url, "LOG_LEVEL": "error"])
        defer { other.kill() }
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let added = try await client.request(.post, "/admin/v1/tenants/\(tenant.id)/keys", as: TestService.adminToken)
            let (keyId, key) = (added.json["keyId"] as? String ?? "", added.json["apiKey"] as? String ?? "")
            let token = try await tenant.token(for: "a")
            // The other instance knows both, and holds a stream of each.
            #expect(try await Self.status(of: "/v1/chats/g", at: other, as: key) == 200)
            #expect(try await Self.status(of: "/v1/chats/g", at: other, as: token) == 200)

            let keyStream = Self.closeFrame(port: other.port, credential: key)
            var sseEnded: Duration?
            try await StreamClients.withEventSource(port: other.port, credential: token) { stream in
                let id = try await tenant.send(in: "g", from: "b")
                #expect((await stream.next())?["messageIds"] as? [String] == [id])

                // Removed through this instance: the other refuses it within a second.
                let removedAt = ContinuousClock.now
                #expect(try await client.request(.delete, "/admin/v1/tenants/\(tenant.id)/keys/\(keyId)", as: TestService.adminToken).status == .noContent)
                let keyRefused = try await Self.timeUntilRefused(path: "/v1/chats/g", at: other, as: key)
                print("removed key refused by the other instance after \(keyRefused) (stream: \(ContinuousClock.now - removedAt))")
                #expect(keyRefused < .seconds(1))

                let revokedAt = ContinuousClock.now
                #expect(try await client.request(.post, "/v1/users/a/tokens/revoke", as: tenant.apiKey).status == .ok)
                let tokenRefused = try await Self.timeUntilRefused(path: "/v1/chats/g", at: other, as: token)
                print("revoked token refused by the other instance after \(tokenRefused)")
                #expect(tokenRefused < .seconds(1))
                #expect(await stream.next(within: .seconds(5)) == nil)
                sseEnded = ContinuousClock.now - revokedAt
            }
            print("SSE of the revoked token ended after \(sseEnded.map { "\($0)" } ?? "never")")
            // Ended, not the 5 s wait running out: 0.1 s alone, up to 3 s with the whole suite's
            // load on this machine's two cores (the close has no deadline of the contract's).
            #expect(sseEnded.map { $0 < .seconds(4) } == true)
            let frame = try await keyStream.value
            #expect(frame?.closeCode == .policyViolation)
            #expect(try await Self.status(of: "/v1/chats/g", at: other, as: tenant.apiKey) == 200)
        }
    }

    /// A WebSocket on `port` with `credential`, until the server closes it (within 10 s).
    static func closeFrame(port: Int, credential: String) -> Task<WebSocketCloseFrame?, any Error> {
        Task { try await WebSocketProbe.closeFrame(port: port, credential: credential, within: .seconds(10)) }
    }

    static func status(of path: String, at instance: ReceiptsdProcess, as credential: String) async throws -> Int {
        var request = HTTPClientRequest(url: instance.baseURL + path)
        request.headers.add(name: "Authorization", value: "Bearer \(credential)")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
        _ = try await response.body.collect(upTo: 1 << 20)
        return Int(response.status.code)
    }

    /// How long until `instance` answers 401 to `credential` (asked every 20 ms, for up to 5 s).
    static func timeUntilRefused(path: String, at instance: ReceiptsdProcess, as credential: String) async throws -> Duration {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .seconds(5) {
            if try await Self.status(of: path, at: instance, as: credential) == 401 { return ContinuousClock.now - start }
            try await Task.sleep(for: .milliseconds(20))
        }
        return .seconds(5)
    }
}
