import Foundation
import HTTPTypes
import TestSupport
import Testing

/// docs/api.md, "Editing a message": `PATCH /v1/chats/{chatId}/messages/{messageId}`, through
/// HTTP, with a stream and a webhook watching.
@Suite("Editing messages")
struct MessageEditTests {
    @Test("an edit changes the text and editedAt only: receipts, labels and counts stay, nobody has it unread again; message.edited to the chat's members")
    func editKeepsReceipts() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b", "c", "d"])
            let message = try await tenant.send(in: "g", from: "a", text: "see you at 5")
            try await tenant.read(in: "g", by: "b")
            try await tenant.deliver(in: "g", to: "c")
            let before = try await tenant.message(message, in: "g", viewer: "a")
            #expect(before.editedAt == nil)
            #expect(before.receipt?.label == "Read by 1/3")
            let unreadBefore = try await tenant.unread(for: "d").count(in: "g")

            try await StreamClients.withWebSocket(port: client.port, credential: try await tenant.token(for: "c")) { member, _ in
                let edited = try await client.request(
                    .patch, "/v1/chats/g/messages/\(message)", as: tenant.apiKey, json: ["text": "see you at 6"])
                #expect(edited.status == .ok)
                let answer = try edited.decode(TestMessage.self)
                #expect(answer.text == "see you at 6")
                #expect(answer.editedAt != nil)
                #expect(answer.createdAt == before.createdAt)
                #expect(answer.seq == before.seq)
                #expect(answer.readBy == ["b"])
                #expect(Set(answer.deliveredTo) == ["b", "c"])

                let event = await member.next()
                #expect(event?["type"] as? String == "message.edited")
                #expect(event?["chatId"] as? String == "g")
                #expect(event?["userId"] as? String == "a")
                #expect(event?["messageIds"] as? [String] == [message])
                #expect(event?["text"] == nil)
            }

            let after = try await tenant.message(message, in: "g", viewer: "a")
            #expect(after.text == "see you at 6")
            #expect(after.receipt == before.receipt)
            #expect(after.recipients?.map(\.userId) == before.recipients?.map(\.userId))
            #expect(try await tenant.messages(in: "g", viewer: "a").first?.editedAt == after.editedAt)
            #expect(try await tenant.unread(for: "b").count(in: "g") == 0)
            #expect(try await tenant.unread(for: "d").count(in: "g") == unreadBefore)
        }
    }

    @Test("the same text again is 200 and changes nothing (editedAt kept, no event); a sender's token edits its own messages only")
    func unchangedAndAuthorization() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let message = try await tenant.send(in: "g", from: "a", text: "one")
            let senderToken = try await tenant.token(for: "a")
            let otherToken = try await tenant.token(for: "b")

            let edited = try await client.request(.patch, "/v1/chats/g/messages/\(message)", as: senderToken, json: ["text": "two"])
            #expect(edited.status == .ok)
            let editedAt = try edited.decode(TestMessage.self).editedAt
            #expect(editedAt != nil)

            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { all, _ in
                let again = try await client.request(.patch, "/v1/chats/g/messages/\(message)", as: tenant.apiKey, json: ["text": "two"])
                #expect(again.status == .ok)
                #expect(try again.decode(TestMessage.self).editedAt == editedAt)
                // The next event is the read below: the repeat made none.
                try await tenant.read(in: "g", by: "b")
                #expect(await all.next()?["type"] as? String == "receipt.read")
            }

            let forbidden = try await client.request(.patch, "/v1/chats/g/messages/\(message)", as: otherToken, json: ["text": "mine now"])
            #expect(forbidden.status == .forbidden)
            #expect(forbidden.errorCode == "forbidden")
            #expect(try await tenant.message(message, in: "g", viewer: "a").text == "two")
            // A retry of the original send now differs from the message: 409, as for any other content.
            let resend = try await client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey, json: ["id": message, "senderId": "a", "text": "one"])
            #expect(resend.status == .conflict)
        }
    }

    @Test("bad edits are 4xx in the contract's shape and change nothing: unknown, deleted, another tenant's, bad text, bad body")
    func badEdits() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let stranger = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let kept = try await tenant.send(in: "g", from: "a", text: "kept")
            let doomed = try await tenant.send(in: "g", from: "a", text: "doomed")
            #expect(try await client.request(.delete, "/v1/chats/g/messages/\(doomed)", as: tenant.apiKey).status == .noContent)

            let cases: [(String, [String: Any], HTTPResponse.Status, String)] = [
                ("/v1/chats/g/messages/never", ["text": "x"], .notFound, "not_found"),
                ("/v1/chats/g/messages/\(doomed)", ["text": "x"], .notFound, "not_found"),
                ("/v1/chats/nochat/messages/\(kept)", ["text": "x"], .notFound, "not_found"),
                ("/v1/chats/g/messages/\(kept)", ["text": String(repeating: "x", count: 65_537)], .badRequest, "invalid_request"),
                ("/v1/chats/g/messages/\(kept)", ["text": "nul\u{0}"], .badRequest, "invalid_request"),
                ("/v1/chats/g/messages/\(kept)", [String: Any](), .badRequest, "invalid_request"),
                ("/v1/chats/g/messages/\(kept)", ["text": 5], .badRequest, "invalid_request"),
                ("/v1/chats/g/messages/\(kept)", ["text": "x", "senderId": "b"], .badRequest, "invalid_request"),
            ]
            for (path, body, status, code) in cases {
                let response = try await client.request(.patch, path, as: tenant.apiKey, json: body)
                #expect(response.status == status, "\(path) \(body)")
                #expect(response.errorCode == code, "\(path) \(body)")
            }
            // Another tenant's key does not find the chat.
            let foreign = try await client.request(.patch, "/v1/chats/g/messages/\(kept)", as: stranger.apiKey, json: ["text": "x"])
            #expect(foreign.status == .notFound)
            let unchanged = try await tenant.message(kept, in: "g", viewer: "a")
            #expect(unchanged.text == "kept")
            #expect(unchanged.editedAt == nil)
        }
    }

    @Test("message.edited reaches a webhook that names it, and only such a webhook")
    func webhookNamesIt() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await WebhookTests.withService { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let message = try await tenant.send(in: "g", from: "a", text: "one")
            let named = try await WebhookTests.putWebhook(
                "edits", url: receiver.url, events: ["message.edited", "message.deleted"], tenant: tenant)
            #expect(named.status == .created)
            #expect(try await client.request(.patch, "/v1/chats/g/messages/\(message)", as: tenant.apiKey, json: ["text": "two"]).status == .ok)
            #expect(try await client.request(.delete, "/v1/chats/g/messages/\(message)", as: tenant.apiKey).status == .noContent)
            await receiver.waitForEvents(2)
            let events = receiver.requests.flatMap(\.events)
            #expect(events.map { $0["type"] as? String } == ["message.edited", "message.deleted"])
            #expect(events.first?["messageIds"] as? [String] == [message])
            #expect(events.first?["userId"] as? String == "a")
        }
    }
}
