import Foundation
import ReceiptsCore
import Testing

@Suite("Group chat receipts")
struct GroupChatReceiptTests {
    @Test("counts style counts readers up to \"Read by all\"")
    func countsProgression() {
        var chat = ChatFixture.group("bob", "carol", "dave", "erin")
        var message = chat.send()
        for user in ["bob", "carol", "dave", "erin"] { message.deliver(to: user) }
        #expect(chat.label(of: message, .counts) == "Delivered")

        message.read(by: "bob")
        #expect(chat.label(of: message, .counts) == "Read by 1/4")
        message.read(by: "carol")
        #expect(chat.label(of: message, .counts) == "Read by 2/4")
        message.read(by: "dave")
        #expect(chat.label(of: message, .counts) == "Read by 3/4")
        #expect(chat.summary(of: message).state == .delivered)
        message.read(by: "erin")
        #expect(chat.label(of: message, .counts) == "Read by all")
        #expect(chat.summary(of: message).state == .read)
    }

    @Test("counts style says \"Delivered\" while nobody has read, delivered to all or not")
    func countsWithoutReads() {
        var chat = ChatFixture.group("bob", "carol")
        var message = chat.send()
        #expect(chat.label(of: message, .counts) == "Delivered")
        message.deliver(to: "bob")
        #expect(chat.summary(of: message).state == .sent)
        #expect(chat.label(of: message, .counts) == "Delivered")
    }

    @Test("ticks style: \"Sent\" until all have it, \"Delivered\" until all read, then \"Read\"")
    func ticksProgression() {
        var chat = ChatFixture.group("bob", "carol", "dave")
        var message = chat.send()
        #expect(chat.label(of: message, .ticks) == "Sent")
        message.read(by: "bob")
        message.deliver(to: "carol")
        #expect(chat.label(of: message, .ticks) == "Sent")
        message.deliver(to: "dave")
        #expect(chat.label(of: message, .ticks) == "Delivered")
        message.read(by: "carol")
        #expect(chat.label(of: message, .ticks) == "Delivered")
        message.read(by: "dave")
        #expect(chat.label(of: message, .ticks) == "Read")
    }

    @Test("a read counts as delivered even with no delivery recorded")
    func readImpliesDelivery() {
        var chat = ChatFixture.group("bob", "carol")
        var message = chat.send()
        message.visibleReads.append(UserReceipt(userId: "bob", at: Instants.noon))
        message.deliver(to: "carol")

        let summary = chat.summary(of: message)
        #expect(summary.counts == [2, 2, 1])
        #expect(summary.state == .delivered)
    }
}
