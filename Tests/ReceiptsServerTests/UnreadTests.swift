import Foundation
import HTTPTypes
import Testing

@Suite("Unread counts")
struct UnreadTests {
    @Test("per chat and in total, with badges, cleared by reading")
    func counts() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("one", members: ["me", "x"])
            try await tenant.createChat("two", members: ["me", "y"])
            try await tenant.createChat("quiet", members: ["me", "z"])
            for _ in 0..<3 { try await tenant.send(in: "one", from: "x") }
            try await tenant.send(in: "one", from: "me")  // my own: never unread for me
            for _ in 0..<100 { try await tenant.send(in: "two", from: "y") }

            let list = try await tenant.unread(for: "me")
            #expect(list.total == 103)
            #expect(list.badge == "99+")
            #expect(list.chats == [
                .init(chatId: "one", unreadCount: 3, badge: "3", markedUnread: false),
                .init(chatId: "two", unreadCount: 100, badge: "99+", markedUnread: false),
            ])
            let read = try await tenant.read(in: "two", by: "me")
            #expect(read.unreadCount == 0)
            let after = try await tenant.unread(for: "me")
            #expect(after.total == 3)
            #expect(after.badge == "3")
            #expect(after.chats.map(\.chatId) == ["one"])
            let nobody = try await tenant.unread(for: "stranger")
            #expect(nobody.total == 0)
            #expect(nobody.badge == "")
            #expect(nobody.chats.isEmpty)
        }
    }

    @Test("mark as unread: at least 1 for that user only, until they read")
    func markUnread() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            try await tenant.send(in: "g", from: "a")
            try await tenant.read(in: "g", by: "b")
            let marked = try await client.request(.post, "/v1/chats/g/unread", as: tenant.apiKey, json: ["userId": "b"])
            #expect(marked.status == .ok)
            #expect(marked.json["unreadCount"] as? Int == 1)
            #expect(try await tenant.unread(for: "b").chats == [.init(chatId: "g", unreadCount: 1, badge: "1", markedUnread: true)])
            #expect(try await tenant.unread(for: "a").total == 0)
            try await tenant.read(in: "g", by: "b")
            #expect(try await tenant.unread(for: "b").chats == [])
        }
    }

    @Test("messages read out of order count once; leaving drops the chat from the list")
    func outOfOrderAndLeave() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            var ids: [String] = []
            for index in 0..<4 { ids.append(try await tenant.send(in: "g", from: "a", text: "\(index)")) }
            #expect(try await tenant.read(in: "g", by: "b", ["messageIds": [ids[2]]]).unreadCount == 3)
            #expect(try await tenant.read(in: "g", by: "b", ["messageIds": [ids[0], ids[1]]]).unreadCount == 1)
            #expect(try await tenant.read(in: "g", by: "b", ["upTo": ids[2]]).marked == 0)
            #expect(try await tenant.unread(for: "b").total == 1)
            _ = try await client.request(.delete, "/v1/chats/g/members/b", as: tenant.apiKey)
            #expect(try await tenant.unread(for: "b").total == 0)
        }
    }
}
