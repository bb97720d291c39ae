import Foundation
import ReceiptsCore
import Testing

@Suite("Messages without recipients")
struct NoRecipientsTests {
    /// What a message with Y = 0 shows: state `sent` and the labels of "no reads".
    private func expectNoRecipients(_ message: MessageReceipts, in chat: ChatFixture) {
        let summary = chat.summary(of: message)
        #expect(summary.state == .sent)
        #expect(summary.counts == [0, 0, 0])
        #expect(summary.readAt == nil)
        #expect(chat.label(of: message, .counts) == "Delivered")
        #expect(chat.label(of: message, .ticks) == "Sent")
        #expect(chat.label(of: message, .imessage) == nil)
        #expect(chat.statuses(of: message).isEmpty)
    }

    @Test("a sender alone in a group has nobody to wait for")
    func senderAlone() {
        var chat = ChatFixture.group()
        let message = chat.send()
        expectNoRecipients(message, in: chat)
    }

    @Test("when everyone else left without reading, nobody is waited for")
    func everyoneLeft() {
        var chat = ChatFixture.group("bob", "carol")
        var message = chat.send()
        message.deliver(to: "bob")
        chat.leave("bob")
        chat.leave("carol")
        expectNoRecipients(message, in: chat)
    }
}
