import Foundation
import HTTPTypes
import Testing

/// docs/api.md, "Events": `unread.changed` carries the user's new totals (`total`, `badge`,
/// `totalMentions`, `mentionsBadge`, as the top of `GET /v1/users/{userId}/unread`), so a
/// device repaints every badge from the event alone.
@Suite("Unread totals in unread.changed")
struct UnreadTotalsEventTests {
    /// The members of an `unread.changed` that a device repaints from.
    struct Repaint: Equatable {
        let chatId: String?
        let unreadCount: Int?
        let mentions: Int?
        let total: Int?
        let badge: String?
        let totalMentions: Int?
        let mentionsBadge: String?

        init(_ event: [String: Any]?) {
            self.chatId = event?["chatId"] as? String
            self.unreadCount = event?["unreadCount"] as? Int
            self.mentions = event?["mentions"] as? Int
            self.total = event?["total"] as? Int
            self.badge = event?["badge"] as? String
            self.totalMentions = event?["totalMentions"] as? Int
            self.mentionsBadge = event?["mentionsBadge"] as? String
        }

        init(_ chatId: String, unread: Int, mentions: Int, total: Int, totalMentions: Int) {
            (self.chatId, self.unreadCount, self.mentions) = (chatId, unread, mentions)
            (self.total, self.badge) = (total, total == 0 ? "" : "\(total)")
            (self.totalMentions, self.mentionsBadge) = (totalMentions, totalMentions == 0 ? "" : "\(totalMentions)")
        }
    }

    /// Chats `work` (2 unread for b) and `noisy` (3 unread for b, one mentions b, muted by b).
    static func setUp(_ client: APIClient) async throws -> TestTenant {
        let tenant = try await client.createTenant()
        try await tenant.createChat("work", members: ["a", "b"])
        try await tenant.createChat("noisy", members: ["a", "b"])
        for _ in 0..<2 { try await tenant.send(in: "work", from: "a") }
        for _ in 0..<2 { try await tenant.send(in: "noisy", from: "a") }
        let mention = try await client.request(
            .post, "/v1/chats/noisy/messages", as: tenant.apiKey, json: ["senderId": "a", "text": "@b", "mentions": ["b"]])
        try #require(mention.status == .created)
        let mute = try await client.request(.put, "/v1/chats/noisy/members/b/settings", as: tenant.apiKey, json: ["muted": true])
        try #require(mute.status == .ok)
        return tenant
    }

    @Test("each read, mute and unmute tells the user's devices their new total (muted chats out) and mentions (muted chats in)")
    func liveTotals() async throws {
        try await TestService.run { client in
            let tenant = try await Self.setUp(client)
            try await StreamClients.withWebSocket(port: client.port, credential: try await tenant.token(for: "b")) { device, _ in
                try await tenant.read(in: "work", by: "b")
                // receipt.read goes to b too (a member); then b's own unread.changed.
                var events = await device.take(2)
                #expect(Repaint(events.last) == Repaint("work", unread: 0, mentions: 0, total: 0, totalMentions: 1))

                #expect(try await client.request(.put, "/v1/chats/noisy/members/b/settings", as: tenant.apiKey, json: ["muted": false]).status == .ok)
                #expect(Repaint(await device.next()) == Repaint("noisy", unread: 3, mentions: 1, total: 3, totalMentions: 1))

                try await tenant.read(in: "noisy", by: "b")
                events = await device.take(2)
                #expect(Repaint(events.last) == Repaint("noisy", unread: 0, mentions: 0, total: 0, totalMentions: 0))
                // The same figures as the list.
                let list = try await tenant.unread(for: "b")
                #expect((list.total, list.badge) == (0, ""))
            }
        }
    }

    @Test("a stream that resumes from the log gets the totals too, as they are when it is delivered")
    func replayedTotals() async throws {
        try await TestService.run { client in
            let tenant = try await Self.setUp(client)
            var lastSeen = ""
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                try await tenant.send(in: "work", from: "b", text: "marker")
                lastSeen = try #require(await stream.next()?["id"] as? String)
            }
            // No stream open: the resuming one reads these from the log.
            try await tenant.read(in: "work", by: "b")
            try await tenant.send(in: "work", from: "a", text: "after the read")
            try await StreamClients.withWebSocket(port: client.port, credential: try await tenant.token(for: "b"), after: lastSeen) { device, _ in
                let replayed = await device.take(3)
                #expect(replayed.map { $0["type"] as? String } == ["receipt.read", "unread.changed", "message.created"])
                // The chat's count as the read left it; the totals as they are now, with the
                // message sent after the read.
                #expect(Repaint(replayed[1]) == Repaint("work", unread: 0, mentions: 0, total: 1, totalMentions: 1))
            }
        }
    }
}
