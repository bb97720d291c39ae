import Foundation
import HTTPTypes
import Testing

/// Most HTTP clients percent-encode `:` and `@` in paths; ids the contract allows must work
/// encoded on every route that names one.
@Suite("Percent-encoded path ids")
struct EncodedPathTests {
    @Test("every route with ids in its path accepts them percent-encoded")
    func everyRoute() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let key = tenant.apiKey
            // room:1, a@x.org, b@x.org, c@x.org, message m:1 — always sent encoded.
            let chat = "room%3A1"
            let put = try await client.request(.put, "/v1/chats/\(chat)", as: key, json: ["kind": "group", "members": ["a@x.org", "b@x.org"]])
            #expect(put.status == .created, "PUT chat: \(put.body)")
            #expect(put.json["id"] as? String == "room:1")

            let get = try await client.request(.get, "/v1/chats/\(chat)", as: key)
            #expect(get.status == .ok, "GET chat: \(get.body)")
            #expect(get.json["id"] as? String == "room:1")

            let join = try await client.request(.post, "/v1/chats/\(chat)/members", as: key, json: ["userId": "c@x.org"])
            #expect(join.status == .ok, "join: \(join.body)")

            let sent = try await client.request(.post, "/v1/chats/\(chat)/messages", as: key, json: ["id": "m:1", "senderId": "a@x.org", "text": "hi"])
            #expect(sent.status == .created, "send: \(sent.body)")
            #expect(sent.json["chatId"] as? String == "room:1")

            let list = try await client.request(.get, "/v1/chats/\(chat)/messages?viewer=a%40x.org", as: key)
            #expect(list.status == .ok, "list: \(list.body)")
            #expect((list.json["messages"] as? [[String: Any]])?.first?["id"] as? String == "m:1")

            let delivered = try await client.request(.post, "/v1/chats/\(chat)/delivered", as: key, json: ["userId": "b@x.org", "messageIds": ["m:1"]])
            #expect(delivered.status == .ok, "delivered: \(delivered.body)")
            #expect(delivered.json["marked"] as? Int == 1)

            let read = try await client.request(.post, "/v1/chats/\(chat)/read", as: key, json: ["userId": "b@x.org"])
            #expect(read.status == .ok, "read: \(read.body)")
            #expect(read.json["marked"] as? Int == 1)

            let shown = try await client.request(.get, "/v1/chats/\(chat)/messages/m%3A1?viewer=a%40x.org", as: key)
            #expect(shown.status == .ok, "message: \(shown.body)")
            #expect(shown.json["readBy"] as? [String] == ["b@x.org"])

            let markedUnread = try await client.request(.post, "/v1/chats/\(chat)/unread", as: key, json: ["userId": "b@x.org"])
            #expect(markedUnread.status == .ok, "mark unread: \(markedUnread.body)")

            let unread = try await client.request(.get, "/v1/users/b%40x.org/unread", as: key)
            #expect(unread.status == .ok, "unread: \(unread.body)")
            #expect((unread.json["chats"] as? [[String: Any]])?.first?["chatId"] as? String == "room:1")

            let settings = try await client.request(.put, "/v1/users/b%40x.org/settings", as: key, json: ["readReceipts": false])
            #expect(settings.status == .ok, "settings: \(settings.body)")
            #expect(settings.json["userId"] as? String == "b@x.org")

            let left = try await client.request(.delete, "/v1/chats/\(chat)/members/c%40x.org", as: key)
            #expect(left.status == .ok, "leave: \(left.body)")
            #expect((left.json["members"] as? [[String: Any]])?.compactMap { $0["userId"] as? String }.sorted() == ["a@x.org", "b@x.org"])

            // A user token names its own user encoded too.
            let token = try await tenant.token(for: "a@x.org")
            #expect(try await client.request(.get, "/v1/users/a%40x.org/unread", as: token).status == .ok)
            #expect(try await client.request(.get, "/v1/users/b%40x.org/unread", as: token).status == .forbidden)
            // Lower-case hex digits decode as well.
            #expect(try await client.request(.get, "/v1/chats/room%3a1", as: key).status == .ok)
        }
    }

    @Test("a decoded id that is not valid stays 400, and so does broken percent-encoding")
    func invalidDecodedIds() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            for path in [
                "/v1/chats/room%2F1",  // a slash
                "/v1/chats/room%201",  // a space
                "/v1/chats/caf%C3%A9",  // é, UTF-8
                "/v1/chats/room%FF",  // not UTF-8
                "/v1/chats/room%3",  // cut short
                "/v1/chats/room%zz",  // not hex
                "/v1/chats/%00",
                "/v1/users/a%2F..%2Fb/unread",
                "/v1/chats/g/messages/m%2F1",
            ] {
                let response = try await client.request(.get, path, as: tenant.apiKey)
                #expect(response.status == .badRequest, "\(path): \(response.status) \(response.body)")
                #expect(response.errorCode == "invalid_request", "\(path)")
            }
            // An id of exactly 128 characters, all encoded, is valid; 129 is not.
            let longest = String(repeating: "%3A", count: 128)
            #expect(try await client.request(.get, "/v1/chats/\(longest)", as: tenant.apiKey).status == .notFound)
            #expect(try await client.request(.get, "/v1/chats/\(longest)%3A", as: tenant.apiKey).status == .badRequest)
        }
    }
}
