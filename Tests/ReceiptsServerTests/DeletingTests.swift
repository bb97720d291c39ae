import Foundation
import HTTPTypes
import Postgres
import TestSupport
import Testing

/// docs/api.md, "Deleting, erasing and credentials": deleting messages and chats, through HTTP,
/// with streams open.
@Suite("Deleting messages and chats")
struct DeletingTests {
    @Test("a deleted message is gone from listings, GET, counts, badges and labels at once; marking it is skipped; its id stays taken")
    func deleteMessage() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b", "c"])
            let first = try await tenant.send(in: "g", from: "a", text: "one")
            let second = try await tenant.send(in: "g", from: "a", text: "two")
            try await tenant.deliver(in: "g", to: "b", ["messageIds": [first]])
            try await tenant.deliver(in: "g", to: "c", ["messageIds": [first]])
            try await tenant.read(in: "g", by: "c", ["messageIds": [second]])
            #expect(try await tenant.unread(for: "b").count(in: "g") == 2)
            #expect(try await tenant.unread(for: "c").count(in: "g") == 1)
            // The imessage label is on the sender's most recent message only.
            #expect(try await tenant.message(first, in: "g", viewer: "a", query: "&labels=imessage").receipt?.label == nil)

            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { all, _ in
                let deleted = try await client.request(.delete, "/v1/chats/g/messages/\(second)", as: tenant.apiKey)
                #expect(deleted.status == .noContent)
                #expect(deleted.body.isEmpty)
                let events = await all.take(2)
                #expect(events.first?["type"] as? String == "message.deleted")
                #expect(events.first?["chatId"] as? String == "g")
                #expect(events.first?["messageIds"] as? [String] == [second])
                // b's count changed (2 -> 1); c had read it: no event for c; nor for the sender.
                let unread = events.dropFirst()
                #expect(unread.map { $0["userId"] as? String } == ["b"])
                #expect(unread.first?["unreadCount"] as? Int == 1)
            }

            #expect(try await tenant.unread(for: "b").count(in: "g") == 1)
            #expect(try await tenant.unread(for: "b").badge == "1")
            #expect(try await tenant.unread(for: "c").count(in: "g") == 1)
            #expect(try await tenant.unread(for: "a").total == 0)
            #expect(try await tenant.messages(in: "g", viewer: "a").map(\.id) == [first])
            let get = try await client.request(.get, "/v1/chats/g/messages/\(second)?viewer=a", as: tenant.apiKey)
            #expect(get.status == .notFound)
            #expect(get.errorCode == "not_found")
            // The imessage label moves to the sender's previous message; Y and X as before.
            let moved = try await tenant.messages(in: "g", viewer: "a", query: "&labels=imessage").first?.receipt
            #expect(moved?.label == "Delivered")
            #expect(moved?.recipients == 2)
            #expect(moved?.read == 0)

            // Marking it is skipped; up to it is 404.
            #expect(try await tenant.read(in: "g", by: "b", ["messageIds": [second]]).marked == 0)
            let upTo = try await client.request(.post, "/v1/chats/g/read", as: tenant.apiKey, json: ["userId": "b", "upTo": second])
            #expect(upTo.status == .notFound)
            // Deleting again: 204; a message that never existed: 404; the id stays taken: 409.
            #expect(try await client.request(.delete, "/v1/chats/g/messages/\(second)", as: tenant.apiKey).status == .noContent)
            #expect(try await client.request(.delete, "/v1/chats/g/messages/never", as: tenant.apiKey).status == .notFound)
            #expect(try await client.request(.delete, "/v1/chats/nochat/messages/\(first)", as: tenant.apiKey).status == .notFound)
            let again = try await client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey, json: ["id": second, "senderId": "a", "text": "two"])
            #expect(again.status == .conflict)

            // A stream opened now gets the next change first: the delete made no late events.
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { all, _ in
                try await tenant.read(in: "g", by: "c")
                #expect(await all.next()?["type"] as? String == "receipt.read")
            }
            // Reading everything afterwards leaves every count at 0 and the arithmetic exact.
            #expect(try await tenant.read(in: "g", by: "b").unreadCount == 0)
            #expect(try await tenant.read(in: "g", by: "c").unreadCount == 0)
            let third = try await tenant.send(in: "g", from: "a")
            #expect(try await tenant.unread(for: "b").count(in: "g") == 1)
            let receipt = try await tenant.message(third, in: "g", viewer: "a").receipt
            #expect(receipt?.recipients == 2)
            #expect(receipt?.read == 0)
        }
    }

    @Test("a user token deletes only its own messages; ids are checked; another tenant's chat is 404")
    func deleteMessageRights() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let other = try await client.createTenant(name: "other")
            try await tenant.createChat("g", members: ["a", "b"])
            let mine = try await tenant.send(in: "g", from: "a")
            let theirs = try await tenant.send(in: "g", from: "b")
            let tokenA = try await tenant.token(for: "a")
            let refused = try await client.request(.delete, "/v1/chats/g/messages/\(theirs)", as: tokenA)
            #expect(refused.status == .forbidden)
            #expect(refused.errorCode == "forbidden")
            #expect(try await tenant.messages(in: "g", viewer: "a").count == 2)
            #expect(try await client.request(.delete, "/v1/chats/g/messages/\(mine)", as: tokenA).status == .noContent)
            #expect(try await client.request(.delete, "/v1/chats/g/messages/\(theirs)", as: other.apiKey).status == .notFound)
            #expect(try await client.request(.delete, "/v1/chats/g/messages/\(theirs)", as: nil).status == .unauthorized)
            let badId = try await client.request(.delete, "/v1/chats/g/messages/bad%20id", as: tenant.apiKey)
            #expect(badId.status == .badRequest)
            #expect(try await tenant.messages(in: "g", viewer: "a").map(\.id) == [theirs])
            // Only the tenant key deletes chats.
            #expect(try await client.request(.delete, "/v1/chats/g", as: tokenA).status == .forbidden)
        }
    }

    @Test("48 deletes at once in 8 chats (deleted together): each answered as alone, one message.deleted per deleted message, counts exact; a repeat is 204, another's message with a user token 403 and only that")
    func concurrentDeletes() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let chats = (0..<8).map { "c\($0)" }
            // Per chat: a1 b1 a2 b2 a3 b3 (a and b alternate); c has read a1 and b1.
            for chat in chats {
                try await tenant.createChat(chat, members: ["a", "b", "c"])
                for index in 1...3 {
                    try await tenant.send(in: chat, from: "a", id: "\(chat)-a\(index)")
                    try await tenant.send(in: chat, from: "b", id: "\(chat)-b\(index)")
                }
                try await tenant.read(in: chat, by: "c", ["messageIds": ["\(chat)-a1", "\(chat)-b1"]])
            }
            let tokenA = try await tenant.token(for: "a")
            // Per chat, all at once: a1 twice by the tenant (deleted, then a repeat), b2 by a's
            // token (not theirs: 403), a2 by a's token, b3 by the tenant, an id never sent (404).
            let requests: [(chat: String, message: String, credential: String, status: HTTPResponse.Status)] = chats.flatMap { chat in
                [(chat, "a1", tenant.apiKey, .noContent), (chat, "a1", tenant.apiKey, .noContent), (chat, "b2", tokenA, .forbidden),
                 (chat, "a2", tokenA, .noContent), (chat, "b3", tenant.apiKey, .noContent), (chat, "never", tenant.apiKey, .notFound)]
            }

            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { all, _ in
                let answers = try await withThrowingTaskGroup(of: (Int, APIResponse).self) { group in
                    for (index, request) in requests.enumerated() {
                        group.addTask {
                            let id = request.message == "never" ? "never" : "\(request.chat)-\(request.message)"
                            return (index, try await client.request(.delete, "/v1/chats/\(request.chat)/messages/\(id)", as: request.credential))
                        }
                    }
                    return try await group.reduce(into: [Int: APIResponse]()) { $0[$1.0] = $1.1 }
                }
                for (index, request) in requests.enumerated() {
                    let answer = try #require(answers[index])
                    #expect(answer.status == request.status, "\(request.chat)/\(request.message): \(answer.body)")
                    if request.status == .forbidden { #expect(answer.errorCode == "forbidden") }
                    if request.status == .notFound { #expect(answer.errorCode == "not_found") }
                }

                // Everything the deletes announced arrived before an event sent after them.
                try await tenant.createChat("elsewhere", members: ["a", "z"])
                let marker = try await tenant.send(in: "elsewhere", from: "a", id: "marker")
                var events: [[String: Any]] = []
                while let event = await all.next() {
                    if event["type"] as? String == "message.created", event["messageIds"] as? [String] == [marker] { break }
                    events.append(event)
                }
                let deleted = events.filter { $0["type"] as? String == "message.deleted" }
                #expect(deleted.count == 3 * chats.count)
                let deletedIds = deleted.flatMap { $0["messageIds"] as? [String] ?? [] }
                #expect(Set(deletedIds) == Set(chats.flatMap { ["\($0)-a1", "\($0)-a2", "\($0)-b3"] }))
                #expect(deletedIds.count == Set(deletedIds).count)
                // unread.changed: b for a1 and a2; c for a2 and b3 (c had read a1); a for b3.
                let unread = events.filter { $0["type"] as? String == "unread.changed" }
                #expect(unread.count == 5 * chats.count)
                for chat in chats {
                    let ofChat = unread.filter { $0["chatId"] as? String == chat }
                    for (user, counts) in [("a", [2]), ("b", [2, 1]), ("c", [3, 2])] {
                        #expect(ofChat.filter { $0["userId"] as? String == user }.map { $0["unreadCount"] as? Int } == counts, "\(chat) \(user)")
                    }
                }
            }

            for chat in chats {
                #expect(try await tenant.messages(in: chat, viewer: "a").map(\.id) == ["b1", "b2", "a3"].map { "\(chat)-\($0)" })
                try await Self.expectCountsMatchDefinition(tenant: tenant.id, chat: chat, users: ["a", "b", "c"])
            }
            // a: b1 b2; b: a3; c: b2 a3 (b1 read); per chat.
            #expect(try await tenant.unread(for: "a").total == 2 * chats.count)
            #expect(try await tenant.unread(for: "b").total == 1 * chats.count)
            #expect(try await tenant.unread(for: "c").total == 2 * chats.count)
            // Deleting again, one at a time now: 204 each, nothing announced, nothing changed.
            #expect(try await client.request(.delete, "/v1/chats/c3/messages/c3-b3", as: tenant.apiKey).status == .noContent)
            #expect(try await client.request(.delete, "/v1/chats/c3/messages/c3-a2", as: tokenA).status == .noContent)
            #expect(try await tenant.unread(for: "c").count(in: "c3") == 2)
        }
    }

    @Test("a deleted chat is gone with its members, messages and receipts; counts drop at once; its id starts an empty chat again")
    func deleteChat() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b", "c"])
            try await tenant.createChat("kept", members: ["a", "b"])
            for _ in 0..<5 { try await tenant.send(in: "g", from: "a") }
            try await tenant.send(in: "kept", from: "a")
            try await tenant.read(in: "g", by: "c")
            #expect(try await tenant.unread(for: "b").total == 6)
            let tokenB = try await tenant.token(for: "b")

            try await StreamClients.withWebSocket(port: client.port, credential: tokenB) { b, _ in
                let deleted = try await client.request(.delete, "/v1/chats/g", as: tenant.apiKey)
                #expect(deleted.status == .noContent)
                let events = await b.take(2)
                #expect(events.first?["type"] as? String == "chat.deleted")
                #expect(events.first?["chatId"] as? String == "g")
                #expect(events.first?["userId"] == nil)
                #expect(events.last?["type"] as? String == "unread.changed")
                #expect(events.last?["unreadCount"] as? Int == 0)
            }
            let unread = try await tenant.unread(for: "b")
            #expect(unread.total == 1)
            #expect(unread.chats.map(\.chatId) == ["kept"])
            #expect(try await client.request(.get, "/v1/chats/g", as: tenant.apiKey).status == .notFound)
            #expect(try await client.request(.get, "/v1/chats/g/messages", as: tenant.apiKey).status == .notFound)
            #expect(try await client.request(.delete, "/v1/chats/g", as: tenant.apiKey).status == .notFound)
            let read = try await client.request(.post, "/v1/chats/g/read", as: tenant.apiKey, json: ["userId": "b"])
            #expect(read.status == .notFound)

            // The same id: a new, empty chat, whatever the purge has done yet.
            try await tenant.createChat("g", members: ["b", "d"])
            #expect(try await tenant.messages(in: "g", viewer: "b").isEmpty)
            let fresh = try await tenant.send(in: "g", from: "d")
            #expect(try await tenant.message(fresh, in: "g", viewer: "d").seq == 1)
            #expect(try await tenant.unread(for: "b").count(in: "g") == 1)
            #expect(try await tenant.messages(in: "kept", viewer: "a").count == 1)
        }
    }

    @Test("the background purge removes a deleted chat's messages and receipts in batches")
    func purge() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("big", members: ["a", "b"])
            // 500 a statement: a transaction holding event ids for long would hold every event
            // hub on the database (other tests' too) back at its gap.
            for first in stride(from: 1, to: 3000, by: 500) {
                try await TestDatabase.pool.query(
                    "SELECT receipts.send_message($1, 'big', 'm' || n, 'a', 'x') FROM generate_series($2::int, $2::int + 499) AS n",
                    [tenant.id, first])
            }
            #expect(try await client.request(.delete, "/v1/chats/big", as: tenant.apiKey).status == .noContent)
            let deadline = ContinuousClock.now + .seconds(20)
            var left = -1
            while ContinuousClock.now < deadline {
                left = try await Self.rowsLeft(tenant: tenant.id, chat: "big")
                if left == 0 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(left == 0)
        }
    }

    /// Messages, receipt chunks and purge rows of a chat, seen beyond row-level security.
    static func rowsLeft(tenant: String, chat: String) async throws -> Int {
        try await TestDatabase.pool.withTransaction { connection in
            try await connection.execute("SELECT set_config('receipts.tenant_id', $1, true)", [tenant])
            return try await connection.query(
                """
                SELECT (SELECT count(*) FROM receipts.messages WHERE tenant_id = $1 AND chat_id = $2)
                     + (SELECT count(*) FROM receipts.receipt_chunks WHERE tenant_id = $1 AND chat_id = $2)
                     + (SELECT count(*) FROM receipts.chat_purges WHERE tenant_id = $1 AND chat_id = $2)
                """, [tenant, chat]).scalar(Int.self)
        }
    }

    @Test("50 readers marking while a message and then the chat are deleted: consistent counts, no error but the contract's")
    func deletingUnderConcurrency() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let readers = (1...50).map { "r\($0)" }
            try await tenant.createChat("g", members: ["s"] + readers)
            var sent: [String] = []
            for index in 0..<20 { sent.append(try await tenant.send(in: "g", from: "s", text: "\(index)")) }
            let ids = sent
            let doomed = ids[10]
            let statuses = try await withThrowingTaskGroup(of: [HTTPResponse.Status].self) { group in
                for (index, reader) in readers.enumerated() {
                    group.addTask {
                        var seen: [HTTPResponse.Status] = []
                        for round in 0..<6 {
                            let body: [String: Any] = round % 2 == 0
                                ? ["userId": reader, "messageIds": [ids[(index + round) % ids.count], doomed]]
                                : ["userId": reader, "upTo": ids[(index + round * 3) % ids.count]]
                            seen.append(try await client.request(.post, "/v1/chats/g/read", as: tenant.apiKey, json: body).status)
                            seen.append(try await client.request(.get, "/v1/users/\(reader)/unread", as: tenant.apiKey).status)
                        }
                        return seen
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(30))
                    let message = try await client.request(.delete, "/v1/chats/g/messages/\(doomed)", as: tenant.apiKey)
                    // Counts right after the message delete: the definition, user by user.
                    try await Self.expectCountsMatchDefinition(tenant: tenant.id, chat: "g", users: readers)
                    try await Task.sleep(for: .milliseconds(30))
                    let chat = try await client.request(.delete, "/v1/chats/g", as: tenant.apiKey)
                    return [message.status, chat.status]
                }
                var all: [HTTPResponse.Status] = []
                for try await statuses in group { all += statuses }
                return all
            }
            // Reads after the chat is gone are 404, reads of the deleted message mark nothing; nothing else.
            #expect(statuses.allSatisfy { [.ok, .noContent, .notFound].contains($0) }, "\(Set(statuses.map(\.code)))")
            for reader in readers {
                #expect(try await tenant.unread(for: reader).total == 0)
            }
        }
    }

    /// Every user's count through the service's view equals the count message by message.
    static func expectCountsMatchDefinition(tenant: String, chat: String, users: [String]) async throws {
        try await TestDatabase.pool.withTransaction { connection in
            try await connection.execute("SELECT set_config('receipts.tenant_id', $1, true)", [tenant])
            for user in users {
                let expected = try await connection.query(UnreadDefinition.countedOneByOne, [tenant, chat, user]).scalar(Int.self)
                let counted = try await connection.query("SELECT receipts.unread_count($1, $2, $3)::int8", [tenant, chat, user]).scalar(Int.self)
                #expect(counted == expected, "user \(user)")
            }
        }
    }
}
