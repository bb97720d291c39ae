import Foundation
import HTTPTypes
import TestSupport
import Testing

/// docs/api.md, "Threads": replies sent with `threadId`, a root's summary, the main timeline
/// and one thread listed apart, and deleting replies and roots.
@Suite("Threads")
struct ThreadTests {
    @Test("replies name their root; the root shows its summary; the main timeline leaves replies out and ?thread= lists them; replies count as unread")
    func repliesAndListings() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let root = try await tenant.send(in: "g", from: "a", text: "plan?")
            try await StreamClients.withWebSocket(port: client.port, credential: try await tenant.token(for: "b")) { stream, _ in
                let first = try await reply(tenant, to: root, from: "b", text: "friday")
                let created = await stream.next()
                #expect(created?["type"] as? String == "message.created")
                #expect(created?["messageIds"] as? [String] == [first.id])
                #expect(created?["threadId"] as? String == root)
                try await tenant.send(in: "g", from: "a", text: "main again")
                #expect(await stream.next()?["threadId"] is NSNull)
            }
            let second = try await reply(tenant, to: root, from: "a", text: "ok")
            #expect(second.threadId == root)
            #expect(second.thread == nil)

            let shown = try await tenant.message(root, in: "g", viewer: "a")
            #expect(shown.threadId == nil)
            #expect(shown.thread == TestThreadSummary(replies: 2, lastReplyAt: second.createdAt))
            let main = try await tenant.messages(in: "g", viewer: "a")
            #expect(main.map(\.text) == ["plan?", "main again"])
            #expect(main.first?.thread?.replies == 2)
            let thread = try await tenant.messages(in: "g", viewer: "a", query: "&thread=\(root)")
            #expect(thread.map(\.text) == ["friday", "ok"])
            #expect(thread.allSatisfy { $0.threadId == root })
            let paged = try await tenant.messages(in: "g", viewer: "a", query: "&thread=\(root)&limit=1")
            #expect(paged.map(\.text) == ["ok"])
            // b has the root, a's main message and a's reply unread; a has b's reply.
            #expect(try await tenant.unread(for: "b").count(in: "g") == 3)
            #expect(try await tenant.unread(for: "a").count(in: "g") == 1)
        }
    }

    @Test("a threadId that names no message, or a reply, is 400; ?thread= naming no root is 404; nothing is sent")
    func badThreads() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            try await tenant.createChat("other", members: ["a", "b"])
            let root = try await tenant.send(in: "g", from: "a")
            let elsewhere = try await tenant.send(in: "other", from: "a")
            let answer = try await reply(tenant, to: root, from: "b", text: "r")
            for thread in ["never", answer.id, elsewhere] {
                let response = try await client.request(
                    .post, "/v1/chats/g/messages", as: tenant.apiKey, json: ["senderId": "a", "text": "x", "threadId": thread])
                #expect(response.status == .badRequest, "\(thread)")
                #expect(response.errorCode == "invalid_request", "\(thread)")
            }
            let badType = try await client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey, json: ["senderId": "a", "text": "x", "threadId": 5])
            #expect(badType.status == .badRequest)
            for thread in ["never", answer.id] {
                let listed = try await client.request(.get, "/v1/chats/g/messages?thread=\(thread)", as: tenant.apiKey)
                #expect(listed.status == .notFound, "\(thread)")
                #expect(listed.errorCode == "not_found", "\(thread)")
            }
            #expect(try await tenant.messages(in: "g", viewer: "a").count == 1)
            #expect(try await tenant.messages(in: "g", viewer: "a", query: "&thread=\(root)").count == 1)
        }
    }

    @Test("deleting a reply takes it out of the summary; deleting a root deletes its replies, their counts and ids with it, in one message.deleted")
    func deletes() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b", "c"])
            let root = try await tenant.send(in: "g", from: "a", text: "root")
            let first = try await reply(tenant, to: root, from: "b", text: "one")
            let second = try await reply(tenant, to: root, from: "c", text: "two")
            let other = try await tenant.send(in: "g", from: "a", text: "other")
            try await tenant.read(in: "g", by: "b", ["messageIds": [second.id]])
            #expect(try await tenant.unread(for: "b").count(in: "g") == 2)  // root, other

            #expect(try await client.request(.delete, "/v1/chats/g/messages/\(second.id)", as: tenant.apiKey).status == .noContent)
            #expect(try await tenant.message(root, in: "g", viewer: "a").thread == TestThreadSummary(replies: 1, lastReplyAt: first.createdAt))
            #expect(try await tenant.unread(for: "a").count(in: "g") == 1)  // b's reply

            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { all, _ in
                let response = try await client.request(.delete, "/v1/chats/g/messages/\(root)", as: tenant.apiKey)
                #expect(response.status == .noContent)
                let deleted = await all.next()
                #expect(deleted?["type"] as? String == "message.deleted")
                #expect(deleted?["messageIds"] as? [String] == [root, first.id])
            }
            #expect(try await tenant.messages(in: "g", viewer: "a").map(\.id) == [other])
            #expect(try await client.request(.get, "/v1/chats/g/messages/\(first.id)", as: tenant.apiKey).status == .notFound)
            #expect(try await tenant.unread(for: "a").count(in: "g") == 0)
            #expect(try await tenant.unread(for: "b").count(in: "g") == 1)
            #expect(try await tenant.unread(for: "c").count(in: "g") == 1)
            let again = try await client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey, json: ["id": first.id, "senderId": "b", "text": "one"])
            #expect(again.status == .conflict)
            // Counts stay exact afterwards.
            #expect(try await tenant.read(in: "g", by: "b").unreadCount == 0)
            #expect(try await tenant.read(in: "g", by: "c").unreadCount == 0)
        }
    }

    @Test("reading or delivering with thread covers that thread's replies, with \"main\" the main timeline; counts stay exact; bad threads are 4xx")
    func markingInThreads() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let root = try await tenant.send(in: "g", from: "a", text: "root")
            _ = try await reply(tenant, to: root, from: "a", text: "r1")
            let main = try await tenant.send(in: "g", from: "a", text: "m1")
            _ = try await reply(tenant, to: root, from: "a", text: "r2")
            #expect(try await tenant.unread(for: "b").count(in: "g") == 4)

            let thread = try await tenant.read(in: "g", by: "b", ["thread": root])
            #expect(thread.marked == 2)
            #expect(thread.unreadCount == 2)
            let upTo = try await tenant.read(in: "g", by: "b", ["thread": "main", "upTo": root])
            #expect(upTo.marked == 1)
            #expect(upTo.unreadCount == 1)
            let mainAll = try await tenant.read(in: "g", by: "b", ["thread": "main"])
            #expect(mainAll.marked == 1)
            #expect(mainAll.unreadCount == 0)
            #expect(try await tenant.message(main, in: "g", viewer: "a").readBy == ["b"])
            // Pages whose messages do not follow each other (replies between them) show each one's receipts.
            #expect(try await tenant.messages(in: "g", viewer: "a").map(\.readBy) == [["b"], ["b"]])
            #expect(try await tenant.messages(in: "g", viewer: "a", query: "&thread=\(root)").map(\.readBy) == [["b"], ["b"]])

            // New messages: reading the main timeline leaves the reply unread, and the count knows.
            let r3 = try await reply(tenant, to: root, from: "a", text: "r3")
            try await tenant.send(in: "g", from: "a", text: "m2")
            #expect(try await tenant.read(in: "g", by: "b", ["thread": "main"]).unreadCount == 1)
            let delivered = try await client.request(.post, "/v1/chats/g/delivered", as: tenant.apiKey, json: ["userId": "b", "thread": root])
            #expect(delivered.status == .ok)
            #expect(delivered.json["marked"] as? Int == 1)
            #expect(try await tenant.message(r3.id, in: "g", viewer: "a").deliveredTo == ["b"])
            #expect(try await tenant.read(in: "g", by: "b").unreadCount == 0)

            let bad: [([String: Any], HTTPResponse.Status, String)] = [
                (["userId": "b", "thread": "never"], .notFound, "not_found"),
                (["userId": "b", "thread": r3.id], .notFound, "not_found"),
                (["userId": "b", "thread": root, "messageIds": [r3.id]], .badRequest, "invalid_request"),
                (["userId": "b", "thread": 5], .badRequest, "invalid_request"),
            ]
            for (body, status, code) in bad {
                for path in ["/v1/chats/g/read", "/v1/chats/g/delivered"] {
                    let response = try await client.request(.post, path, as: tenant.apiKey, json: body)
                    #expect(response.status == status, "\(path) \(body)")
                    #expect(response.errorCode == code, "\(path) \(body)")
                }
            }
        }
    }

    @Test("the unread list names each chat's threads with unread replies, newest first, with their mentions; reading a thread takes it off")
    func unreadThreads() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let older = try await tenant.send(in: "g", from: "a", text: "older")
            let newer = try await tenant.send(in: "g", from: "a", text: "newer")
            _ = try await reply(tenant, to: older, from: "a", text: "o1")
            _ = try await reply(tenant, to: newer, from: "a", text: "n1")
            let mention = try await tenant.client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey,
                json: ["senderId": "a", "text": "@b", "threadId": older, "mentions": ["b"]])
            #expect(mention.status == .created)
            _ = try await reply(tenant, to: newer, from: "b", text: "own reply")

            let list = try await tenant.unread(for: "b")
            #expect(list.count(in: "g") == 5)
            #expect(list.chats.first?.threads == [
                .init(threadId: older, unreadCount: 2, mentions: 1),
                .init(threadId: newer, unreadCount: 1, mentions: 0),
            ])
            try await tenant.read(in: "g", by: "b", ["thread": older])
            let after = try await tenant.unread(for: "b")
            #expect(after.chats.first?.threads == [.init(threadId: newer, unreadCount: 1, mentions: 0)])
            #expect(after.count(in: "g") == 3)
            #expect(after.mentions == 0)
            // A chat without threads lists none.
            try await tenant.read(in: "g", by: "b", ["thread": newer])
            #expect(try await tenant.unread(for: "b").chats.first?.threads == [])
        }
    }

    @Test("unread.changed after a read in one thread carries that thread's new counts; a read of the main timeline, or across threads, carries none")
    func threadCountsInEvents() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let first = try await tenant.send(in: "g", from: "a", text: "first")
            let second = try await tenant.send(in: "g", from: "a", text: "second")
            let plain = try await reply(tenant, to: first, from: "a", text: "f1")
            let mention = try await tenant.client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey,
                json: ["senderId": "a", "text": "@b", "threadId": first, "mentions": ["b"]])
            #expect(mention.status == .created)
            _ = try await reply(tenant, to: second, from: "a", text: "s1")

            try await StreamClients.withWebSocket(port: client.port, credential: try await tenant.token(for: "b")) { device, _ in
                /// The members of b's next unread.changed that name a thread, and whether it names one.
                func nextUnreadChanged() async -> [String: Any]? {
                    while let event = await device.next() {
                        if event["type"] as? String == "unread.changed" { return event }
                    }
                    return nil
                }
                func thread(_ event: [String: Any]?) -> [String?] {
                    [event?["threadId"] as? String, (event?["threadUnreadCount"] as? Int).map(String.init),
                     (event?["threadMentions"] as? Int).map(String.init)]
                }
                // One reply by id: its thread, one unread left there, and that one mentions b.
                try await tenant.read(in: "g", by: "b", ["messageIds": [plain.id]])
                var event = await nextUnreadChanged()
                #expect(thread(event) == [first, "1", "1"])
                #expect(event?["unreadCount"] as? Int == 4)
                // The main timeline: no thread's count changed.
                try await tenant.read(in: "g", by: "b", ["thread": "main"])
                event = await nextUnreadChanged()
                #expect(thread(event) == [nil, nil, nil])
                #expect(event?["unreadCount"] as? Int == 2)
                // The rest of the first thread.
                try await tenant.read(in: "g", by: "b", ["thread": first])
                event = await nextUnreadChanged()
                #expect(thread(event) == [first, "0", "0"])
                // The whole chat, with replies in two threads: no single thread to name.
                _ = try await reply(tenant, to: first, from: "a", text: "f3")
                try await tenant.read(in: "g", by: "b")
                event = await nextUnreadChanged()
                #expect(thread(event) == [nil, nil, nil])
                #expect(event?["unreadCount"] as? Int == 0)
            }
        }
    }

    /// Sends a reply in chat g; the message as answered.
    private func reply(_ tenant: TestTenant, to root: String, from sender: String, text: String) async throws -> TestMessage {
        let response = try await tenant.client.request(
            .post, "/v1/chats/g/messages", as: tenant.apiKey, json: ["senderId": sender, "text": text, "threadId": root])
        try #require(response.status == .created, "replying: \(response.status) \(response.body)")
        return try response.decode(TestMessage.self)
    }
}
