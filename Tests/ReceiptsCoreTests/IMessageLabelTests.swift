import Foundation
import ReceiptsCore
import Testing

@Suite("iMessage-style labels")
struct IMessageLabelTests {
    @Test("only the viewer's most recent message is labelled")
    func onlyMostRecent() {
        var chat = ChatFixture.direct
        var message = chat.send()
        message.read(by: "bob")
        #expect(chat.label(of: message, .imessage, isViewersMostRecent: false) == nil)
        #expect(chat.label(of: message, .imessage, isViewersMostRecent: true) != nil)
    }

    @Test("nothing until delivered to every recipient, then \"Delivered\"")
    func deliveredToAll() {
        var chat = ChatFixture.group("bob", "carol", "dave")
        var message = chat.send()
        message.deliver(to: "bob")
        message.deliver(to: "carol")
        #expect(chat.label(of: message, .imessage) == nil)
        message.deliver(to: "dave")
        #expect(chat.label(of: message, .imessage) == "Delivered")
    }

    @Test("not delivered to all stays unlabelled even when someone read")
    func partlyDeliveredButRead() {
        var chat = ChatFixture.group("bob", "carol")
        var message = chat.send()
        message.read(by: "bob")
        #expect(chat.label(of: message, .imessage) == nil)
    }

    /// A direct read at `instant`, told in `timeZone`.
    struct ClockCase: Sendable, CustomTestStringConvertible {
        let instant: String
        let timeZone: String
        let expected: String
        var testDescription: String { "\(instant) in \(timeZone)" }
    }

    @Test("a direct read shows its time on a 12-hour clock in the requested time zone", arguments: [
        ClockCase(instant: "2024-07-15T17:42:00Z", timeZone: "UTC", expected: "Read at 5:42 PM"),
        // Summer: New York is on EDT, UTC−4.
        ClockCase(instant: "2024-07-15T17:42:00Z", timeZone: "America/New_York", expected: "Read at 1:42 PM"),
        // Winter: New York is on EST, UTC−5.
        ClockCase(instant: "2024-01-15T17:42:00Z", timeZone: "America/New_York", expected: "Read at 12:42 PM"),
        ClockCase(instant: "2024-07-15T00:05:00Z", timeZone: "UTC", expected: "Read at 12:05 AM"),
        ClockCase(instant: "2024-07-15T12:30:00Z", timeZone: "UTC", expected: "Read at 12:30 PM"),
        ClockCase(instant: "2024-07-15T09:07:00Z", timeZone: "UTC", expected: "Read at 9:07 AM"),
    ])
    func directReadTime(_ clock: ClockCase) throws {
        let timeZone = try #require(TimeZone(identifier: clock.timeZone))
        var chat = ChatFixture.direct
        var message = chat.send()
        message.read(by: "bob", at: Instants.utc(clock.instant))
        #expect(chat.label(of: message, .imessage, timeZone: timeZone) == clock.expected)
    }

    @Test("the time zone defaults to UTC")
    func defaultTimeZone() {
        var chat = ChatFixture.direct
        var message = chat.send()
        message.read(by: "bob", at: Instants.utc("2024-07-15T17:42:00Z"))
        let summary = ReceiptRules.summary(of: message, in: chat.roster, style: .imessage, isViewersMostRecent: true)
        #expect(summary.label == "Read at 5:42 PM")
    }

    @Test("a group says \"Read by some users\", then \"Read by all users\"")
    func groupReads() {
        var chat = ChatFixture.group("bob", "carol")
        var message = chat.send()
        message.deliver(to: "bob")
        message.deliver(to: "carol")
        message.read(by: "bob")
        #expect(chat.label(of: message, .imessage) == "Read by some users")
        message.read(by: "carol")
        #expect(chat.label(of: message, .imessage) == "Read by all users")
    }
}
