import Foundation
import ReceiptsCore
import Testing

@Suite("Per-recipient status")
struct RecipientStatusTests {
    @Test("one entry per recipient, sorted by user id, with delivery and visible read times")
    func sortedStatuses() {
        var chat = ChatFixture.group("dave", "bob", "carol", "erin")
        var message = chat.send()
        let delivered = Instants.utc("2024-07-15T12:01:00Z")
        let read = Instants.utc("2024-07-15T12:02:00Z")
        message.deliver(to: "dave", at: delivered)
        message.deliver(to: "bob", at: delivered)
        message.read(by: "bob", at: read)
        message.readHidden(by: "carol", at: read)
        chat.leave("erin")

        #expect(chat.statuses(of: message) == [
            RecipientStatus(userId: "bob", deliveredAt: delivered, readAt: read),
            RecipientStatus(userId: "carol", deliveredAt: read, readAt: nil),
            RecipientStatus(userId: "dave", deliveredAt: delivered, readAt: nil),
        ])
    }

    @Test("a visible read without a recorded delivery shows the read time as delivery")
    func readWithoutDelivery() {
        var chat = ChatFixture.direct
        var message = chat.send()
        let read = Instants.utc("2024-07-15T12:02:00Z")
        message.visibleReads.append(UserReceipt(userId: "bob", at: read))

        #expect(chat.statuses(of: message) == [RecipientStatus(userId: "bob", deliveredAt: read, readAt: read)])
        #expect(chat.summary(of: message).delivered == 1)
    }

    @Test("the counts agree with the list the sender sees beside them")
    func countsMatchStatuses() {
        var chat = ChatFixture.group("bob", "carol", "dave")
        var message = chat.send()
        message.read(by: "bob")
        message.readHidden(by: "carol")
        let statuses = chat.statuses(of: message)
        let summary = chat.summary(of: message)

        #expect(summary.recipients == statuses.count)
        #expect(summary.delivered == statuses.count { $0.deliveredAt != nil })
        #expect(summary.read == statuses.count { $0.readAt != nil })
    }
}
