import Foundation
import HTTPTypes
import TestSupport
import Testing

/// docs/api.md, "Mentions": messages that name members or everyone, and unread mentions per
/// chat and for the user, muted chats included.
@Suite("Mentions")
struct MentionTests {
    @Test("a message keeps the members it named (not the sender, not strangers, each once); unread mentions count per chat and in total, and go with reading")
    func namedMentions() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b", "c"])
            let sent = try await client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey,
                json: ["senderId": "a", "text": "@b @c @a @zed", "mentions": ["b", "c", "b", "a", "zed"]])
            #expect(sent.status == .created)
            let first = try sent.decode(TestMessage.self)
            #expect(first.mentions == ["b", "c"])
            let second = try await sendMentioning(tenant, from: "a", ["b"])
            try await tenant.send(in: "g", from: "a", text: "no mention")

            let b = try await tenant.unread(for: "b")
            #expect(b.count(in: "g") == 3)
            #expect(b.mentions(in: "g") == 2)
            #expect(b.mentions == 2)
            #expect(b.mentionsBadge == "2")
            #expect(try await tenant.unread(for: "c").mentions(in: "g") == 1)
            #expect(try await tenant.unread(for: "a").mentions == 0)
            #expect(try await tenant.message(first.id, in: "g", viewer: "a").mentions == ["b", "c"])
            #expect(try await tenant.messages(in: "g", viewer: "b").map(\.mentions) == [["b", "c"], ["b"], []])

            // Read out of order, then up to a message, then all.
            try await tenant.read(in: "g", by: "b", ["messageIds": [second]])
            #expect(try await tenant.unread(for: "b").mentions(in: "g") == 1)
            try await tenant.read(in: "g", by: "b", ["upTo": first.id])
            let after = try await tenant.unread(for: "b")
            #expect(after.mentions == 0)
            #expect(after.mentionsBadge == "")
            #expect(after.count(in: "g") == 1)
        }
    }

    @Test("mentionsAll mentions every member it is sent to, not later joiners; a mention counts in a muted chat; a deleted message's mention goes")
    func everyoneMutedAndDeleted() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b", "c"])
            let all = try await client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey, json: ["senderId": "a", "text": "@all", "mentionsAll": true])
            #expect(all.status == .created)
            let everyone = try all.decode(TestMessage.self)
            #expect(everyone.mentions == ["b", "c"])
            #expect(try await client.request(.post, "/v1/chats/g/members", as: tenant.apiKey, json: ["userId": "d"]).status == .ok)
            #expect(try await tenant.message(everyone.id, in: "g", viewer: "a").mentions == ["b", "c"])
            #expect(try await tenant.unread(for: "d").mentions == 0)

            #expect(try await client.request(.put, "/v1/chats/g/members/b/settings", as: tenant.apiKey, json: ["muted": true]).status == .ok)
            let muted = try await tenant.unread(for: "b")
            #expect(muted.total == 0)
            #expect(muted.mentions == 1)
            #expect(muted.mentionsBadge == "1")

            #expect(try await client.request(.delete, "/v1/chats/g/messages/\(everyone.id)", as: tenant.apiKey).status == .noContent)
            #expect(try await tenant.unread(for: "b").mentions == 0)
            #expect(try await tenant.unread(for: "c").mentions == 0)
        }
    }

    @Test("message.created carries mentions (and mentionsAll); bad mentions are 400 and send nothing")
    func eventsAndBadInput() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            try await StreamClients.withWebSocket(port: client.port, credential: try await tenant.token(for: "b")) { stream, _ in
                let named = try await sendMentioning(tenant, from: "a", ["b"])
                let event = await stream.next()
                #expect(event?["type"] as? String == "message.created")
                #expect(event?["messageIds"] as? [String] == [named])
                #expect(event?["mentions"] as? [String] == ["b"])
                #expect(event?["mentionsAll"] == nil)
                try await tenant.send(in: "g", from: "a")
                #expect(await stream.next()?["mentions"] as? [String] == [])
                let all = try await client.request(
                    .post, "/v1/chats/g/messages", as: tenant.apiKey, json: ["senderId": "a", "text": "@all", "mentionsAll": true])
                #expect(all.status == .created)
                let everyone = await stream.next()
                #expect(everyone?["mentions"] as? [String] == [])
                #expect(everyone?["mentionsAll"] as? Bool == true)
            }
            let bad: [[String: Any]] = [
                ["senderId": "a", "text": "x", "mentions": "b"],
                ["senderId": "a", "text": "x", "mentions": ["not valid!"]],
                ["senderId": "a", "text": "x", "mentions": (0...100).map { "u\($0)" }],
                ["senderId": "a", "text": "x", "mentionsAll": "yes"],
                ["senderId": "a", "text": "x", "mentions": NSNull()],
            ]
            for body in bad {
                let response = try await client.request(.post, "/v1/chats/g/messages", as: tenant.apiKey, json: body)
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.errorCode == "invalid_request", "\(body)")
            }
            #expect(try await tenant.messages(in: "g", viewer: "a").count == 3)
        }
    }

    @Test("erasing a user takes their id out of the messages that named them, and their mention counts with it")
    func erasure() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b", "c"])
            let message = try await sendMentioning(tenant, from: "a", ["b", "c"])
            let erased = try await client.request(.delete, "/v1/users/b", as: tenant.apiKey)
            #expect(erased.status == .accepted)
            #expect(try await tenant.message(message, in: "g", viewer: "a").mentions == ["c"])
            #expect(try await tenant.unread(for: "b").mentions == 0)
            #expect(try await tenant.unread(for: "c").mentions == 1)
        }
    }

    /// Sends a message in chat g naming `users`; its id.
    private func sendMentioning(_ tenant: TestTenant, from sender: String, _ users: [String]) async throws -> String {
        let response = try await tenant.client.request(
            .post, "/v1/chats/g/messages", as: tenant.apiKey, json: ["senderId": sender, "text": "hi", "mentions": users])
        try #require(response.status == .created, "sending: \(response.status) \(response.body)")
        return try response.decode(TestMessage.self).id
    }
}
