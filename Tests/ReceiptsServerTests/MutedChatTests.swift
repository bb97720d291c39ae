import Foundation
import HTTPTypes
import TestSupport
import Testing

/// docs/api.md, "Muted chats": a member's `muted` setting keeps a chat's unread messages out
/// of their total and badge, not out of the list.
@Suite("Muted chats")
struct MutedChatTests {
    @Test("a muted chat is listed with its count and muted: true, and left out of total and badge; unmuting brings it back")
    func mutedChatLeavesTheBadge() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("loud", members: ["a", "b"])
            try await tenant.createChat("quiet", members: ["a", "b"])
            try await tenant.send(in: "loud", from: "a")
            for _ in 0..<3 { try await tenant.send(in: "quiet", from: "a") }
            #expect(try await tenant.unread(for: "b").total == 4)

            let muted = try await client.request(
                .put, "/v1/chats/quiet/members/b/settings", as: try await tenant.token(for: "b"), json: ["muted": true])
            #expect(muted.status == .ok)
            #expect(muted.json as NSDictionary == ["chatId": "quiet", "userId": "b", "muted": true] as NSDictionary)

            let list = try await tenant.unread(for: "b")
            #expect(list.total == 1)
            #expect(list.badge == "1")
            #expect(list.chats == [
                .init(chatId: "loud", unreadCount: 1, badge: "1", markedUnread: false, muted: false),
                .init(chatId: "quiet", unreadCount: 3, badge: "3", markedUnread: false, muted: true),
            ])
            // Only b muted it: a's view of the same chat is unchanged.
            try await tenant.send(in: "quiet", from: "b")
            #expect(try await tenant.unread(for: "a").total == 1)
            // Read, it leaves the list; it stays muted through a leave and a rejoin.
            try await tenant.read(in: "quiet", by: "b")
            #expect(try await tenant.unread(for: "b").chats.map(\.chatId) == ["loud"])
            #expect(try await client.request(.delete, "/v1/chats/quiet/members/b", as: tenant.apiKey).status == .ok)
            #expect(try await client.request(.post, "/v1/chats/quiet/members", as: tenant.apiKey, json: ["userId": "b"]).status == .ok)
            try await tenant.send(in: "quiet", from: "a")
            let rejoined = try await tenant.unread(for: "b")
            #expect(rejoined.total == 1)
            #expect(rejoined.chats.last == .init(chatId: "quiet", unreadCount: 1, badge: "1", markedUnread: false, muted: true))

            #expect(try await client.request(.put, "/v1/chats/quiet/members/b/settings", as: tenant.apiKey, json: ["muted": false]).status == .ok)
            let unmuted = try await tenant.unread(for: "b")
            #expect(unmuted.total == 2)
            #expect(unmuted.chats.map(\.muted) == [false, false])
        }
    }

    @Test("muting is the member's own: another user's token 403, a non-member 403, an unknown chat 404, a bad body 400; none changes anything")
    func badMutes() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let stranger = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            try await tenant.send(in: "g", from: "a")
            let cases: [(String, String?, [String: Any], HTTPResponse.Status, String)] = [
                ("/v1/chats/g/members/b/settings", try await tenant.token(for: "a"), ["muted": true], .forbidden, "forbidden"),
                ("/v1/chats/g/members/c/settings", nil, ["muted": true], .forbidden, "forbidden"),
                ("/v1/chats/nochat/members/b/settings", nil, ["muted": true], .notFound, "not_found"),
                ("/v1/chats/g/members/b/settings", nil, [:], .badRequest, "invalid_request"),
                ("/v1/chats/g/members/b/settings", nil, ["muted": "yes"], .badRequest, "invalid_request"),
                ("/v1/chats/g/members/b/settings", nil, ["muted": true, "readReceipts": false], .badRequest, "invalid_request"),
            ]
            for (path, credential, body, status, code) in cases {
                let response = try await client.request(.put, path, as: credential ?? tenant.apiKey, json: body)
                #expect(response.status == status, "\(path) \(body)")
                #expect(response.errorCode == code, "\(path) \(body)")
            }
            let foreign = try await client.request(.put, "/v1/chats/g/members/b/settings", as: stranger.apiKey, json: ["muted": true])
            #expect(foreign.status == .notFound)
            let list = try await tenant.unread(for: "b")
            #expect(list.total == 1)
            #expect(list.chats.map(\.muted) == [false])
        }
    }
}
