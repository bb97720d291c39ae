import Foundation
import HTTPTypes
import Testing

@Suite("Idempotency and concurrency")
struct IdempotencyAndConcurrencyTests {
    @Test("PUT chat: 201 new, 200 same, 409 different")
    func putChat() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let body: [String: Any] = ["kind": "group", "members": ["a", "b", "c"]]
            let first = try await client.request(.put, "/v1/chats/g", as: tenant.apiKey, json: body)
            #expect(first.status == .created)
            let chat = try first.decode(TestChat.self)
            #expect(chat.id == "g")
            #expect(chat.kind == "group")
            #expect(chat.members.map(\.userId) == ["a", "b", "c"])
            let same = try await client.request(.put, "/v1/chats/g", as: tenant.apiKey, json: ["kind": "group", "members": ["c", "a", "b"]])
            #expect(same.status == .ok)
            let otherMembers = try await client.request(.put, "/v1/chats/g", as: tenant.apiKey, json: ["kind": "group", "members": ["a", "b"]])
            #expect(otherMembers.status == .conflict)
            #expect(otherMembers.errorCode == "conflict")
            let otherKind = try await client.request(.put, "/v1/chats/g", as: tenant.apiKey, json: ["kind": "direct", "members": ["a", "b"]])
            #expect(otherKind.status == .conflict)
            let direct = try await client.request(.post, "/v1/chats/d/members", as: tenant.apiKey, json: ["userId": "x"])
            #expect(direct.status == .notFound)
            try await tenant.createChat("d", kind: "direct", members: ["a", "b"])
            let joinDirect = try await client.request(.post, "/v1/chats/d/members", as: tenant.apiKey, json: ["userId": "x"])
            #expect(joinDirect.status == .conflict)
        }
    }

    @Test("a message sent again with the same id: 200 and the same message; other content: 409")
    func messageIdempotency() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let body: [String: Any] = ["id": "m-1", "senderId": "a", "text": "hi"]
            let first = try await client.request(.post, "/v1/chats/g/messages", as: tenant.apiKey, json: body)
            #expect(first.status == .created)
            let again = try await client.request(.post, "/v1/chats/g/messages", as: tenant.apiKey, json: body)
            #expect(again.status == .ok)
            let (created, repeated) = (try first.decode(TestMessage.self), try again.decode(TestMessage.self))
            #expect(created.id == repeated.id)
            #expect(created.seq == repeated.seq)
            #expect(created.createdAt == repeated.createdAt)
            let other = try await client.request(.post, "/v1/chats/g/messages", as: tenant.apiKey, json: ["id": "m-1", "senderId": "a", "text": "changed"])
            #expect(other.status == .conflict)
            #expect(try await tenant.messages(in: "g", viewer: "a").map(\.text) == ["hi"])

            let next = try await tenant.send(in: "g", from: "b")
            #expect(try await tenant.message(next, in: "g", viewer: "b").seq == 2)
        }
    }

    @Test("a repeated send compares the whole body: another threadId, mentions or mentionsAll is 409; the same mentions after a member left is 200")
    func messageIdempotencyWholeBody() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b", "c"])
            let root = try await tenant.send(in: "g", from: "a")
            let body: [String: Any] = ["id": "m-1", "senderId": "a", "text": "hi @b", "threadId": root, "mentions": ["b", "nobody", "b"]]
            let first = try await client.request(.post, "/v1/chats/g/messages", as: tenant.apiKey, json: body)
            #expect(first.status == .created, "\(first.body)")
            #expect(try first.decode(TestMessage.self).mentions == ["b"])

            var others: [(String, [String: Any])] = []
            var mainTimeline = body
            mainTimeline["threadId"] = nil
            others.append(("no threadId", mainTimeline))
            var otherRoot = body
            otherRoot["threadId"] = try await tenant.send(in: "g", from: "b")
            others.append(("another threadId", otherRoot))
            var otherMention = body
            otherMention["mentions"] = ["c"]
            others.append(("other mentions", otherMention))
            var noMentions = body
            noMentions["mentions"] = nil
            others.append(("no mentions", noMentions))
            var everyone = body
            everyone["mentionsAll"] = true
            others.append(("mentionsAll", everyone))
            for (what, other) in others {
                let answer = try await client.request(.post, "/v1/chats/g/messages", as: tenant.apiKey, json: other)
                #expect(answer.status == .conflict, "\(what): \(answer.body)")
                #expect(answer.errorCode == "conflict")
            }

            // The same request again, however the mentions are spelled once the rule is
            // applied (a non-member, a repeat), and after b left: the same message.
            var respelled = body
            respelled["mentions"] = ["nobody", "b", "a"]
            #expect(try await client.request(.post, "/v1/chats/g/messages", as: tenant.apiKey, json: respelled).status == .ok)
            let left = try await client.request(.delete, "/v1/chats/g/members/b", as: tenant.apiKey)
            #expect(left.status == .noContent || left.status == .ok, "\(left.body)")
            let again = try await client.request(.post, "/v1/chats/g/messages", as: tenant.apiKey, json: body)
            #expect(again.status == .ok, "\(again.body)")
            #expect(try again.decode(TestMessage.self).mentions == ["b"])
            // Nothing else was sent: the two roots in the main timeline, m-1 a reply.
            #expect(try await tenant.messages(in: "g", viewer: "a").count == 2)
            #expect(try await tenant.message("m-1", in: "g", viewer: "a").seq == 2)
        }
    }

    @Test("marking twice marks 0 the second time")
    func repeatedMarking() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let id = try await tenant.send(in: "g", from: "a")
            #expect(try await tenant.deliver(in: "g", to: "b", ["messageIds": [id]]).marked == 1)
            #expect(try await tenant.deliver(in: "g", to: "b", ["messageIds": [id]]).marked == 0)
            #expect(try await tenant.read(in: "g", by: "b", ["messageIds": [id]]).marked == 1)
            #expect(try await tenant.read(in: "g", by: "b", ["messageIds": [id]]).marked == 0)
            #expect(try await tenant.read(in: "g", by: "b").marked == 0)
            // The sender's own message is never marked by the sender.
            #expect(try await tenant.read(in: "g", by: "a", ["messageIds": [id]]).marked == 0)
            let message = try await tenant.message(id, in: "g", viewer: "a")
            #expect(message.readBy == ["b"])
            #expect(message.deliveredTo == ["b"])
        }
    }

    @Test("20 concurrent readers of one message are all recorded")
    func concurrentReaders() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let readers = (1...20).map { "reader\($0)" }
            try await tenant.createChat("big", members: ["sender"] + readers)
            let id = try await tenant.send(in: "big", from: "sender")
            try await withThrowingTaskGroup(of: Int.self) { group in
                for reader in readers {
                    group.addTask { try await tenant.read(in: "big", by: reader, ["messageIds": [id]]).marked }
                }
                var marked = 0
                for try await count in group { marked += count }
                #expect(marked == 20)
            }
            let message = try await tenant.message(id, in: "big", viewer: "sender")
            #expect(message.readBy.sorted() == readers.sorted())
            #expect(Set(message.deliveredTo) == Set(readers))
            #expect(message.receipt?.label == "Read by all")
        }
    }

    @Test("one read-all marks 1,200 messages")
    func readAllOfManyMessages() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("busy", kind: "direct", members: ["a", "b"])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        for index in stride(from: worker, to: 1200, by: 4) {
                            try await tenant.send(in: "busy", from: "a", text: "message \(index)")
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await tenant.unread(for: "b").count(in: "busy") == 1200)
            let read = try await tenant.read(in: "busy", by: "b")
            #expect(read.marked == 1200)
            #expect(read.unreadCount == 0)
            #expect(try await tenant.unread(for: "b").total == 0)
            let newest = try await tenant.messages(in: "busy", viewer: "a", query: "&limit=1000")
            #expect(newest.count == 1000)
            #expect(newest.allSatisfy { $0.readBy == ["b"] && $0.receipt?.label == "Read" })
            #expect(newest.map(\.seq) == Array(201...1200))
        }
    }
}
