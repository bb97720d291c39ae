import Foundation
import ReceiptsCore

/// A chat whose membership history a test plays out step by step — send, join, leave —
/// recording periods the way the service does, so tests read like the user story.
struct ChatFixture {
    /// The chat as the receipt rules see it.
    private(set) var roster: ChatRoster
    /// The `seq` of the last message sent; joins and leaves are measured against it.
    private(set) var lastSeq: Int64 = 0

    /// A chat whose `members` all joined before any message.
    init(_ kind: ChatKind, members: [String]) {
        self.roster = ChatRoster(
            kind: kind,
            periods: members.map { MembershipPeriod(userId: $0, afterSeq: 0, untilSeq: nil) },
            currentMembers: Set(members)
        )
    }

    /// The direct chat of alice and bob.
    static var direct: ChatFixture { ChatFixture(.direct, members: ["alice", "bob"]) }

    /// A group of alice (who sends) and `others`.
    static func group(_ others: String...) -> ChatFixture {
        ChatFixture(.group, members: ["alice"] + others)
    }

    /// Sends a new message with no receipts yet.
    mutating func send(from sender: String = "alice") -> MessageReceipts {
        lastSeq += 1
        return MessageReceipts(seq: lastSeq, senderId: sender, deliveries: [], visibleReads: [], hiddenReaders: [])
    }

    /// `user` leaves now: their open period ends at the last message.
    mutating func leave(_ user: String) {
        for index in roster.periods.indices where roster.periods[index].userId == user && roster.periods[index].untilSeq == nil {
            roster.periods[index].untilSeq = lastSeq
        }
        roster.currentMembers.remove(user)
    }

    /// `user` joins (or rejoins) now: a new period starts after the last message.
    mutating func join(_ user: String) {
        roster.periods.append(MembershipPeriod(userId: user, afterSeq: lastSeq, untilSeq: nil))
        roster.currentMembers.insert(user)
    }

    /// The sender's receipt for `message`.
    func summary(
        of message: MessageReceipts,
        style: LabelStyle = .counts,
        isViewersMostRecent: Bool = true,
        timeZone: TimeZone = .gmt
    ) -> ReceiptSummary {
        ReceiptRules.summary(
            of: message, in: roster, style: style, isViewersMostRecent: isViewersMostRecent, timeZone: timeZone
        )
    }

    /// The label the sender sees under `message`.
    func label(
        of message: MessageReceipts,
        _ style: LabelStyle,
        isViewersMostRecent: Bool = true,
        timeZone: TimeZone = .gmt
    ) -> String? {
        summary(of: message, style: style, isViewersMostRecent: isViewersMostRecent, timeZone: timeZone).label
    }

    /// The sender's per-recipient list for `message`.
    func statuses(of message: MessageReceipts) -> [RecipientStatus] {
        ReceiptRules.recipientStatuses(of: message, in: roster)
    }

    /// The recipients of `message`.
    func recipients(of message: MessageReceipts) -> [String] {
        ReceiptRules.recipients(of: message, in: roster)
    }
}
