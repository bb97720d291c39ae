import Foundation
import HTTPTypes
import Testing

@Suite("Leaving a chat")
struct LeaveAuthorizationTests {
    @Test("a user token of a non-member gets 403 on DELETE …/members/{self}, as on GET, and learns no members")
    func nonMemberLeave() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let outsider = try await tenant.token(for: "c")
            #expect(try await client.request(.get, "/v1/chats/g", as: outsider).status == .forbidden)
            let response = try await client.request(.delete, "/v1/chats/g/members/c", as: outsider)
            #expect(response.status == .forbidden, "\(response.body)")
            #expect(response.errorCode == "forbidden")
            #expect(!response.body.contains("\"a\""))

            // A member leaves as before; the tenant key may "leave" a non-member (idempotent).
            let member = try await tenant.token(for: "b")
            let left = try await client.request(.delete, "/v1/chats/g/members/b", as: member)
            #expect(left.status == .ok, "\(left.body)")
            #expect(try await client.request(.delete, "/v1/chats/g/members/c", as: tenant.apiKey).status == .ok)
            let chat = try await client.request(.get, "/v1/chats/g", as: tenant.apiKey)
            #expect((chat.json["members"] as? [[String: Any]])?.compactMap { $0["userId"] as? String } == ["a"])
        }
    }
}
