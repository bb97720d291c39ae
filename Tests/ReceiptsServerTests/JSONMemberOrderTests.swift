import Foundation
import HTTPTypes
import Testing

/// Every kind of answer lists its members in the documented order (`docs/api.md`, "JSON"):
/// `id` first, then as the contract lists them, the same on every response.
@Suite("JSON member order")
struct JSONMemberOrderTests {
    @Test("each kind of response, error and event lists its members in the documented order")
    func memberOrder() async throws {
        try await TestService.run { client in
            let tenantResponse = try await client.request(.post, "/admin/v1/tenants", as: TestService.adminToken, json: ["name": "Order"])
            #expect(Self.keys(tenantResponse.body, depth: 1) == ["id", "name", "apiKey"])
            let key = try #require(tenantResponse.json["apiKey"] as? String)
            let chatKeys = ["id", "kind", "members", "createdAt"]
            let messageKeys = ["id", "chatId", "seq", "senderId", "text", "threadId", "mentions", "createdAt", "editedAt", "readBy", "deliveredTo"]
            let receiptKeys = ["state", "recipients", "delivered", "read", "readAt", "label"]

            try await StreamClients.withWebSocket(port: client.port, credential: key) { reader, _ in
                let chat = try await client.request(.put, "/v1/chats/g", as: key, json: ["kind": "group", "members": ["a", "b", "c"]])
                #expect(chat.status == .created)
                #expect(Self.keys(chat.body, depth: 1) == chatKeys)
                #expect(Self.keys(chat.body, depth: 3) == Array(repeating: ["userId", "joinedAt"], count: 3).flatMap { $0 })
                for response in [
                    try await client.request(.get, "/v1/chats/g", as: key),
                    try await client.request(.post, "/v1/chats/g/members", as: key, json: ["userId": "d"]),
                    try await client.request(.delete, "/v1/chats/g/members/d", as: key),
                ] {
                    #expect(Self.keys(response.body, depth: 1) == chatKeys, "\(response.body)")
                }

                let sent = try await client.request(.post, "/v1/chats/g/messages", as: key, json: ["id": "m1", "senderId": "a", "text": "hi"])
                #expect(Self.keys(sent.body, depth: 1) == messageKeys)
                let delivered = try await client.request(.post, "/v1/chats/g/delivered", as: key, json: ["userId": "c"])
                #expect(Self.keys(delivered.body, depth: 1) == ["marked"])
                let read = try await client.request(.post, "/v1/chats/g/read", as: key, json: ["userId": "b"])
                #expect(Self.keys(read.body, depth: 1) == ["marked", "unreadCount"])
                let unread = try await client.request(.post, "/v1/chats/g/unread", as: key, json: ["userId": "b"])
                #expect(Self.keys(unread.body, depth: 1) == ["unreadCount"])

                let single = try await client.request(.get, "/v1/chats/g/messages/m1?viewer=a", as: key)
                #expect(Self.keys(single.body, depth: 1) == messageKeys + ["receipt", "recipients"])
                #expect(Self.keys(single.body, depth: 2) == receiptKeys)
                #expect(Self.keys(single.body, depth: 3) == Array(repeating: ["userId", "deliveredAt", "readAt"], count: 2).flatMap { $0 })
                let list = try await client.request(.get, "/v1/chats/g/messages?viewer=a", as: key)
                #expect(Self.keys(list.body, depth: 1) == ["messages"])
                #expect(Self.keys(list.body, depth: 3) == messageKeys + ["receipt"])
                #expect(Self.keys(list.body, depth: 4) == receiptKeys)

                let unreadList = try await client.request(.get, "/v1/users/b/unread", as: key)
                #expect(Self.keys(unreadList.body, depth: 1) == ["total", "badge", "mentions", "mentionsBadge", "chats"])
                #expect(Self.keys(unreadList.body, depth: 3) == ["chatId", "unreadCount", "badge", "markedUnread", "mentions", "muted", "threads"])
                let settings = try await client.request(.put, "/v1/users/b/settings", as: key, json: ["readReceipts": true])
                #expect(Self.keys(settings.body, depth: 1) == ["userId", "readReceipts"])
                let token = try await client.request(.post, "/v1/tokens", as: key, json: ["userId": "b"])
                #expect(Self.keys(token.body, depth: 1) == ["token", "expiresAt"])
                let error = try await client.request(.get, "/v1/chats/nope", as: key)
                #expect(Self.keys(error.body, depth: 1) == ["error"])
                #expect(Self.keys(error.body, depth: 2) == ["code", "message"])
                let health = try await client.request(.get, "/healthz", as: nil)
                #expect(Self.keys(health.body, depth: 1) == ["status"])

                // message.created, receipt.delivered, receipt.read, unread.changed (read), unread.changed (mark unread).
                var events: [String] = []
                for index in 0..<5 {
                    events.append(try #require(await reader.received.event(at: index, before: .now + .seconds(10))))
                }
                let base = ["id", "type", "chatId", "userId", "messageIds", "at"]
                var types: [String] = []
                for event in events {
                    let type = try #require((try JSONSerialization.jsonObject(with: Data(event.utf8)) as? [String: Any])?["type"] as? String)
                    types.append(type)
                    // A type's own members follow, in the stored object's order (jsonb: shorter names first),
                    // then an unread.changed's user totals.
                    let own = ["message.created": ["mentions", "threadId"], "unread.changed": ["mentions", "unreadCount", "markedUnread", "total", "badge", "totalMentions", "mentionsBadge"]]
                    #expect(Self.keys(event, depth: 1) == base + (own[type] ?? []), "\(event)")
                }
                #expect(Set(types) == ["message.created", "receipt.delivered", "receipt.read", "unread.changed"])
            }
        }
    }

    /// The keys of the objects at `depth` (1: the outermost object; arrays count as a level),
    /// in the order they appear in `json`.
    static func keys(_ json: String, depth wanted: Int) -> [String] {
        var keys: [String] = []
        var containers: [Character] = []
        var expectsKey = false
        var index = json.startIndex
        while index < json.endIndex {
            let character = json[index]
            switch character {
            case "\"":
                var end = json.index(after: index)
                while json[end] != "\"" { end = json.index(end, offsetBy: json[end] == "\\" ? 2 : 1) }
                if expectsKey, containers.last == "{", containers.count == wanted {
                    keys.append(String(json[json.index(after: index)..<end]))
                }
                expectsKey = false
                index = end
            case "{", "[":
                containers.append(character)
                expectsKey = character == "{"
            case "}", "]":
                containers.removeLast()
            case ",":
                expectsKey = containers.last == "{"
            default:
                break
            }
            index = json.index(after: index)
        }
        return keys
    }
}
