import Foundation
import ReceiptsCore
import Testing

@Suite("Receipts as members leave, join and rejoin")
struct MembershipReceiptTests {
    @Test("a member who leaves without reading is no longer waited for")
    func leavingUnreadStopsCounting() {
        var chat = ChatFixture.group("bob", "carol", "dave")
        var message = chat.send()
        for user in ["bob", "carol", "dave"] { message.deliver(to: user) }
        message.read(by: "bob", at: Instants.utc("2024-07-15T12:01:00Z"))
        #expect(chat.label(of: message, .counts) == "Read by 1/3")

        chat.leave("carol")
        #expect(chat.label(of: message, .counts) == "Read by 1/2")
        #expect(chat.recipients(of: message) == ["bob", "dave"])

        message.read(by: "dave", at: Instants.utc("2024-07-15T12:05:00Z"))
        let summary = chat.summary(of: message)
        #expect(summary.label == "Read by all")
        #expect(summary.state == .read)
        #expect(summary.readAt == Instants.utc("2024-07-15T12:05:00Z"))
    }

    @Test("when the last unread member leaves, the message is read by all")
    func lastUnreadLeaves() {
        var chat = ChatFixture.group("bob", "carol", "dave")
        var message = chat.send()
        message.read(by: "bob", at: Instants.utc("2024-07-15T12:01:00Z"))
        message.read(by: "carol", at: Instants.utc("2024-07-15T12:03:00Z"))
        message.deliver(to: "dave")
        #expect(chat.label(of: message, .counts) == "Read by 2/3")

        chat.leave("dave")
        let summary = chat.summary(of: message)
        #expect(summary.label == "Read by all")
        #expect(summary.counts == [2, 2, 2])
        #expect(summary.readAt == Instants.utc("2024-07-15T12:03:00Z"))
        #expect(chat.label(of: message, .ticks) == "Read")
    }

    @Test("a member who read and then left still counts")
    func readThenLeftStillCounts() {
        var chat = ChatFixture.group("bob", "carol", "dave")
        var message = chat.send()
        message.read(by: "bob")
        chat.leave("bob")

        #expect(chat.recipients(of: message) == ["bob", "carol", "dave"])
        #expect(chat.label(of: message, .counts) == "Read by 1/3")
    }

    @Test("a rejoining user is a recipient of messages from their periods only")
    func rejoin() {
        var chat = ChatFixture.group("bob", "carol")
        let before = chat.send()
        chat.leave("bob")
        let during = chat.send()
        chat.join("bob")
        let after = chat.send()

        #expect(chat.recipients(of: before) == ["bob", "carol"])
        #expect(chat.recipients(of: during) == ["carol"])
        #expect(chat.recipients(of: after) == ["bob", "carol"])
    }

    @Test("a user who joined after the message is not its recipient")
    func joinedAfter() {
        var chat = ChatFixture.group("bob")
        var message = chat.send()
        chat.join("carol")
        message.read(by: "bob")

        #expect(chat.recipients(of: message) == ["bob"])
        #expect(chat.label(of: message, .counts) == "Read by all")
        #expect(chat.recipients(of: chat.send()) == ["bob", "carol"])
    }

    @Test("a membership period holds the messages after its join and up to its leave",
          arguments: [(Int64(3), false), (4, true), (7, true), (8, false)])
    func periodBounds(seq: Int64, isMember: Bool) {
        let closed = MembershipPeriod(userId: "bob", afterSeq: 3, untilSeq: 7)
        let open = MembershipPeriod(userId: "bob", afterSeq: 3, untilSeq: nil)
        #expect(closed.contains(seq: seq) == isMember)
        #expect(open.contains(seq: seq) == (seq > 3))
    }
}
