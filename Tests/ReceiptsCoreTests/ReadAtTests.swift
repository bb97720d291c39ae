import Foundation
import ReceiptsCore
import Testing

@Suite("When a message became read")
struct ReadAtTests {
    @Test("readAt is unset until every recipient read, then the latest of their reads")
    func latestReadOnceAllRead() {
        var chat = ChatFixture.group("bob", "carol", "dave")
        var message = chat.send()
        message.read(by: "carol", at: Instants.utc("2024-07-15T12:10:00Z"))
        #expect(chat.summary(of: message).readAt == nil)
        // Stored out of time order: the latest read is not the last one appended.
        message.read(by: "dave", at: Instants.utc("2024-07-15T12:30:00Z"))
        #expect(chat.summary(of: message).readAt == nil)
        message.read(by: "bob", at: Instants.utc("2024-07-15T12:20:00Z"))

        #expect(chat.summary(of: message).readAt == Instants.utc("2024-07-15T12:30:00Z"))
    }

    @Test("a read by someone who is not a recipient does not move readAt")
    func nonRecipientReadIgnored() {
        var chat = ChatFixture.group("bob")
        var message = chat.send()
        message.read(by: "bob", at: Instants.utc("2024-07-15T12:10:00Z"))
        // Not a member when it was sent; the store would refuse this, the rules ignore it.
        message.read(by: "mallory", at: Instants.utc("2024-07-15T13:00:00Z"))
        message.read(by: "alice", at: Instants.utc("2024-07-15T14:00:00Z"))

        let summary = chat.summary(of: message)
        #expect(summary.counts == [1, 1, 1])
        #expect(summary.readAt == Instants.utc("2024-07-15T12:10:00Z"))
    }
}
