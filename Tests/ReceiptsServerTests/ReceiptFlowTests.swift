import Foundation
import HTTPTypes
import Testing

@Suite("Receipts through HTTP")
struct ReceiptFlowTests {
    @Test("direct chat: Delivered, then Read")
    func directChat() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("dm", kind: "direct", members: ["alice", "bob"])
            let id = try await tenant.send(in: "dm", from: "alice")

            var message = try await tenant.message(id, in: "dm", viewer: "alice")
            #expect(message.receipt == TestReceipt(state: "sent", recipients: 1, delivered: 0, read: 0, readAt: nil, label: "Delivered"))

            #expect(try await tenant.deliver(in: "dm", to: "bob").marked == 1)
            message = try await tenant.message(id, in: "dm", viewer: "alice")
            #expect(message.receipt?.state == "delivered")
            #expect(message.receipt?.label == "Delivered")
            #expect(message.deliveredTo == ["bob"])
            #expect(message.readBy == [])

            let read = try await tenant.read(in: "dm", by: "bob")
            #expect(read.marked == 1)
            #expect(read.unreadCount == 0)
            message = try await tenant.message(id, in: "dm", viewer: "alice")
            #expect(message.receipt?.state == "read")
            #expect(message.receipt?.label == "Read")
            #expect(message.receipt?.read == 1)
            #expect(message.receipt?.readAt != nil)
            #expect(message.readBy == ["bob"])
            #expect(message.recipients?.map(\.userId) == ["bob"])
            #expect(message.recipients?.first?.readAt == message.receipt?.readAt)

            // The reader sees the message without a receipt: it is not theirs.
            let asBob = try await tenant.message(id, in: "dm", viewer: "bob")
            #expect(asBob.receipt == nil)
            #expect(asBob.recipients == nil)
        }
    }

    @Test("a read implies delivery, and times are RFC 3339 UTC with milliseconds")
    func readImpliesDelivery() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("dm", kind: "direct", members: ["alice", "bob"])
            let id = try await tenant.send(in: "dm", from: "alice")
            try await tenant.read(in: "dm", by: "bob")
            let message = try await tenant.message(id, in: "dm", viewer: "alice")
            #expect(message.deliveredTo == ["bob"])
            let pattern = #/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/#
            #expect(message.createdAt.wholeMatch(of: pattern) != nil)
            #expect(try #require(message.recipients?.first?.deliveredAt).wholeMatch(of: pattern) != nil)
            #expect(try #require(message.receipt?.readAt).wholeMatch(of: pattern) != nil)
        }
    }

    @Test("group of 5: Read by 1/4, 2/4, 3/4, then Read by all")
    func groupCounts() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let readers = ["b", "c", "d", "e"]
            try await tenant.createChat("team", members: ["a"] + readers)
            let id = try await tenant.send(in: "team", from: "a")
            var labels: [String?] = []
            for reader in readers {
                try await tenant.read(in: "team", by: reader, ["messageIds": [id]])
                labels.append(try await tenant.message(id, in: "team", viewer: "a").receipt?.label)
            }
            #expect(labels == ["Read by 1/4", "Read by 2/4", "Read by 3/4", "Read by all"])
            let final = try await tenant.message(id, in: "team", viewer: "a")
            #expect(final.receipt?.state == "read")
            #expect(final.readBy.sorted() == readers)
            #expect(final.recipients?.map(\.userId) == readers)
        }
    }

    @Test("ticks style: Sent, Delivered, and Read only when all have read")
    func ticks() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("team", members: ["a", "b", "c"])
            let id = try await tenant.send(in: "team", from: "a")
            func label() async throws -> String? {
                try await tenant.messages(in: "team", viewer: "a", query: "&labels=ticks").first { $0.id == id }?.receipt?.label
            }
            #expect(try await label() == "Sent")
            try await tenant.deliver(in: "team", to: "b")
            #expect(try await label() == "Sent")
            try await tenant.deliver(in: "team", to: "c")
            #expect(try await label() == "Delivered")
            try await tenant.read(in: "team", by: "b")
            #expect(try await label() == "Delivered")
            try await tenant.read(in: "team", by: "c")
            #expect(try await label() == "Read")
        }
    }

    @Test("imessage style: only on the most recent message, with the read time in tz")
    func imessage() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("dm", kind: "direct", members: ["alice", "bob"])
            let first = try await tenant.send(in: "dm", from: "alice", text: "one")
            let second = try await tenant.send(in: "dm", from: "alice", text: "two")
            try await tenant.send(in: "dm", from: "bob", text: "reply")

            var messages = try await tenant.messages(in: "dm", viewer: "alice", query: "&labels=imessage")
            #expect(messages.first { $0.id == first }?.receipt?.label == nil)
            #expect(messages.first { $0.id == second }?.receipt?.label == nil)  // not delivered yet

            try await tenant.deliver(in: "dm", to: "bob")
            messages = try await tenant.messages(in: "dm", viewer: "alice", query: "&labels=imessage")
            #expect(messages.first { $0.id == first }?.receipt?.label == nil)
            #expect(messages.first { $0.id == second }?.receipt?.label == "Delivered")

            try await tenant.read(in: "dm", by: "bob")
            let readAt = try #require(try await tenant.message(second, in: "dm", viewer: "alice").receipt?.readAt)
            let date = try #require(try? Date(readAt, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)))
            for zone in ["UTC", "America/New_York", "Asia/Kolkata"] {
                let formatter = DateFormatter()
                formatter.locale = Locale(identifier: "en_US_POSIX")
                formatter.timeZone = TimeZone(identifier: zone)
                formatter.dateFormat = "h:mm a"
                let listed = try await tenant.messages(in: "dm", viewer: "alice", query: "&labels=imessage&tz=\(zone)")
                #expect(listed.first { $0.id == second }?.receipt?.label == "Read at \(formatter.string(from: date))")
            }
        }
    }

    @Test("a member who leaves is no longer waited for; a read made before leaving still counts")
    func leave() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("team", members: ["a", "b", "c", "d"])
            let id = try await tenant.send(in: "team", from: "a")
            try await tenant.read(in: "team", by: "b")
            #expect(try await tenant.message(id, in: "team", viewer: "a").receipt?.label == "Read by 1/3")

            // b read, then left: still counted.
            let left = try await client.request(.delete, "/v1/chats/team/members/b", as: tenant.apiKey)
            #expect(left.status == .ok)
            #expect(try left.decode(TestChat.self).members.map(\.userId) == ["a", "c", "d"])
            #expect(try await tenant.message(id, in: "team", viewer: "a").receipt?.label == "Read by 1/3")

            // c leaves without reading: no longer waited for.
            _ = try await client.request(.delete, "/v1/chats/team/members/c", as: tenant.apiKey)
            #expect(try await tenant.message(id, in: "team", viewer: "a").receipt?.label == "Read by 1/2")
            try await tenant.read(in: "team", by: "d")
            let receipt = try await tenant.message(id, in: "team", viewer: "a").receipt
            #expect(receipt?.label == "Read by all")
            #expect(receipt?.recipients == 2)

            // Leaving again changes nothing.
            let again = try await client.request(.delete, "/v1/chats/team/members/c", as: tenant.apiKey)
            #expect(again.status == .ok)
        }
    }

    @Test("a user who joins later is a recipient only of messages sent while a member")
    func joinAndRejoin() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("team", members: ["a", "b"])
            let before = try await tenant.send(in: "team", from: "a", text: "before z joined")
            let joined = try await client.request(.post, "/v1/chats/team/members", as: tenant.apiKey, json: ["userId": "z"])
            #expect(joined.status == .ok)
            #expect(try joined.decode(TestChat.self).members.map(\.userId) == ["a", "b", "z"])
            let during = try await tenant.send(in: "team", from: "a", text: "while z is in")
            #expect(try await tenant.message(before, in: "team", viewer: "a").receipt?.recipients == 1)
            #expect(try await tenant.message(during, in: "team", viewer: "a").receipt?.recipients == 2)

            // z cannot read what was sent before they joined.
            let read = try await tenant.read(in: "team", by: "z")
            #expect(read.marked == 1)
            #expect(try await tenant.message(before, in: "team", viewer: "a").readBy == [])

            // z leaves, a message is sent, z rejoins: not a recipient of the one sent meanwhile.
            _ = try await client.request(.delete, "/v1/chats/team/members/z", as: tenant.apiKey)
            let away = try await tenant.send(in: "team", from: "a", text: "while z is away")
            _ = try await client.request(.post, "/v1/chats/team/members", as: tenant.apiKey, json: ["userId": "z"])
            let back = try await tenant.send(in: "team", from: "a", text: "z is back")
            #expect(try await tenant.message(away, in: "team", viewer: "a").receipt?.recipients == 1)
            #expect(try await tenant.message(back, in: "team", viewer: "a").receipt?.recipients == 2)
            #expect(try await tenant.unread(for: "z").count(in: "team") == 1)
            #expect(try await tenant.read(in: "team", by: "z").marked == 1)
            #expect(try await tenant.message(away, in: "team", viewer: "a").readBy == [])
        }
    }

    @Test("readReceipts off: the reader's count clears, but nobody sees the read")
    func privateReader() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("team", members: ["a", "b", "c"])
            try await tenant.setReadReceipts("b", false)
            let id = try await tenant.send(in: "team", from: "a")
            let read = try await tenant.read(in: "team", by: "b")
            #expect(read.marked == 1)
            #expect(read.unreadCount == 0)
            #expect(try await tenant.unread(for: "b").total == 0)

            var message = try await tenant.message(id, in: "team", viewer: "a")
            #expect(message.readBy == [])
            #expect(message.deliveredTo == ["b"])  // deliveries stay visible
            #expect(message.receipt?.read == 0)
            #expect(message.receipt?.delivered == 1)
            #expect(message.recipients?.first { $0.userId == "b" }?.readAt == nil)

            // Turning receipts back on reveals nothing; reading again publishes nothing.
            try await tenant.setReadReceipts("b", true)
            #expect(try await tenant.read(in: "team", by: "b").marked == 0)
            try await tenant.read(in: "team", by: "c")
            message = try await tenant.message(id, in: "team", viewer: "a")
            #expect(message.readBy == ["c"])
            #expect(message.receipt?.label == "Read by 1/2")
        }
    }

    @Test("upTo marks that message and every earlier one; the sender's own are skipped")
    func upTo() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("team", members: ["a", "b"])
            var ids: [String] = []
            for index in 0..<5 { ids.append(try await tenant.send(in: "team", from: index == 1 ? "b" : "a", text: "m\(index)")) }
            let read = try await tenant.read(in: "team", by: "b", ["upTo": ids[3]])
            #expect(read.marked == 3)  // m0, m2, m3 (m1 is b's own)
            #expect(read.unreadCount == 1)
            let delivered = try await tenant.deliver(in: "team", to: "b")
            #expect(delivered.marked == 1)
            let unknown = try await client.request(.post, "/v1/chats/team/read", as: tenant.apiKey, json: ["userId": "b", "upTo": "nope"])
            #expect(unknown.status == .notFound)
            #expect(unknown.errorCode == "not_found")
        }
    }
}
