import Foundation
import ReceiptsCore
import Testing

@Suite("Direct chat receipts")
struct DirectChatReceiptTests {
    /// The labels one style shows as alice's message goes sent → delivered → read.
    struct Progression: Sendable, CustomTestStringConvertible {
        let style: LabelStyle
        let sent: String?
        let delivered: String?
        let read: String?
        var testDescription: String { style.rawValue }
    }

    @Test("a message goes sent, delivered, read in every style", arguments: [
        Progression(style: .counts, sent: "Delivered", delivered: "Delivered", read: "Read"),
        Progression(style: .ticks, sent: "Sent", delivered: "Delivered", read: "Read"),
        Progression(style: .imessage, sent: nil, delivered: "Delivered", read: "Read at 5:42 PM"),
    ])
    func progression(_ expected: Progression) {
        var chat = ChatFixture.direct
        var message = chat.send()
        #expect(chat.label(of: message, expected.style) == expected.sent)

        message.deliver(to: "bob", at: Instants.utc("2024-07-15T17:40:00Z"))
        #expect(chat.label(of: message, expected.style) == expected.delivered)

        message.read(by: "bob", at: Instants.utc("2024-07-15T17:42:00Z"))
        #expect(chat.label(of: message, expected.style) == expected.read)
    }

    @Test("state and counts follow the one recipient")
    func stateAndCounts() {
        var chat = ChatFixture.direct
        var message = chat.send()
        let sent = chat.summary(of: message)
        #expect(sent.state == .sent)
        #expect(sent.counts == [1, 0, 0])
        #expect(sent.readAt == nil)

        message.deliver(to: "bob")
        let delivered = chat.summary(of: message)
        #expect(delivered.state == .delivered)
        #expect(delivered.counts == [1, 1, 0])
        #expect(delivered.readAt == nil)

        let readTime = Instants.utc("2024-07-15T17:42:00Z")
        message.read(by: "bob", at: readTime)
        let read = chat.summary(of: message)
        #expect(read.state == .read)
        #expect(read.counts == [1, 1, 1])
        #expect(read.readAt == readTime)
    }

    @Test("the sender is never their own recipient, even if the stored arrays name them")
    func senderIsNeverARecipient() {
        var chat = ChatFixture.direct
        var message = chat.send()
        message.read(by: "alice")
        message.hiddenReaders.insert("alice")

        let summary = chat.summary(of: message)
        #expect(chat.recipients(of: message) == ["bob"])
        #expect(summary.counts == [1, 0, 0])
        #expect(summary.state == .sent)
        #expect(chat.label(of: message, .counts) == "Delivered")
        #expect(chat.statuses(of: message).map(\.userId) == ["bob"])
    }
}
