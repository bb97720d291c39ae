import Foundation
import ReceiptsCore
import Testing

@Suite("Reads made with read receipts off")
struct HiddenReadTests {
    @Test("a current member's hidden read leaves them waited for and unread")
    func currentMemberHiddenRead() {
        var chat = ChatFixture.group("bob", "carol")
        var message = chat.send()
        message.read(by: "bob")
        message.readHidden(by: "carol")

        let summary = chat.summary(of: message)
        #expect(summary.label == "Read by 1/2")
        #expect(summary.counts == [2, 2, 1])
        #expect(summary.state == .delivered)
        #expect(summary.readAt == nil)
        #expect(chat.label(of: message, .imessage) == "Read by some users")
    }

    @Test("a former member whose only read is hidden is no longer a recipient")
    func formerMemberHiddenRead() {
        var chat = ChatFixture.group("bob", "carol")
        var message = chat.send()
        message.read(by: "bob")
        message.readHidden(by: "carol")
        chat.leave("carol")

        #expect(chat.recipients(of: message) == ["bob"])
        #expect(chat.label(of: message, .counts) == "Read by all")
    }

    @Test("a hidden reader's delivery still shows")
    func hiddenReaderDeliveryCounts() {
        var chat = ChatFixture.direct
        var message = chat.send()
        message.readHidden(by: "bob")

        let summary = chat.summary(of: message)
        #expect(summary.state == .delivered)
        #expect(summary.counts == [1, 1, 0])
        #expect(summary.readAt == nil)
        #expect(chat.label(of: message, .counts) == "Delivered")
        #expect(chat.label(of: message, .ticks) == "Delivered")
        #expect(chat.label(of: message, .imessage) == "Delivered")
    }
}
