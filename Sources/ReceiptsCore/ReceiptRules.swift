import Foundation

/// The receipt rules of the OpenAPI document (`Receipt`): who a message is for, and how far it
/// has got with them.
///
/// Pure functions over stored data, so the rules are tested exhaustively without a
/// database and the server applies the same rules to every message it returns.
public enum ReceiptRules {
    /// The recipients (Y) of `message`, sorted by user id.
    ///
    /// A recipient was a member when the message was sent (in any of their membership
    /// periods), is not its sender, and either is still a member — so is still waited
    /// for — or visibly read it before leaving, a read that keeps counting. A former
    /// member whose only read is hidden left no visible trace, so like anyone who left
    /// without reading they are no longer a recipient.
    public static func recipients(of message: MessageReceipts, in roster: ChatRoster) -> [String] {
        let visibleReaders = Set(message.visibleReads.map(\.userId))
        var recipients = Set<String>()
        for period in roster.periods where period.userId != message.senderId && period.contains(seq: message.seq) {
            if roster.currentMembers.contains(period.userId) || visibleReaders.contains(period.userId) {
                recipients.insert(period.userId)
            }
        }
        return recipients.sorted()
    }

    /// Each recipient's delivery and visible read of `message`, sorted by user id: the
    /// sender's "who read it" list.
    ///
    /// A visible read implies delivery, so a recipient who read without a recorded
    /// delivery shows the read time as `deliveredAt`. A hidden read shows as not read;
    /// the delivery that came with it stays visible.
    public static func recipientStatuses(of message: MessageReceipts, in roster: ChatRoster) -> [RecipientStatus] {
        let deliveredAt = earliestTimes(of: message.deliveries)
        let readAt = earliestTimes(of: message.visibleReads)
        return recipients(of: message, in: roster).map { userId in
            RecipientStatus(userId: userId, deliveredAt: deliveredAt[userId] ?? readAt[userId], readAt: readAt[userId])
        }
    }

    /// The `receipt` the sender sees under `message`.
    ///
    /// - Parameters:
    ///   - style: the wording of `label`.
    ///   - isViewersMostRecent: whether this is the viewer's latest message in the chat;
    ///     the `imessage` style labels only that one.
    ///   - timeZone: where the `imessage` style tells "Read at 5:42 PM"; UTC unless the
    ///     viewer asked for another.
    public static func summary(
        of message: MessageReceipts,
        in roster: ChatRoster,
        style: LabelStyle = .counts,
        isViewersMostRecent: Bool,
        timeZone: TimeZone = .gmt
    ) -> ReceiptSummary {
        // The counts of `recipientStatuses`, without listing (and sorting) the recipients of
        // every message of a page.
        Self.summary(
            ReceiptCounts(of: message, in: roster), in: roster, style: style,
            isViewersMostRecent: isViewersMostRecent, timeZone: timeZone)
    }

    static func summary(
        _ counts: ReceiptCounts, in roster: ChatRoster, style: LabelStyle, isViewersMostRecent: Bool, timeZone: TimeZone
    ) -> ReceiptSummary {
        ReceiptSummary(
            state: counts.state,
            recipients: counts.recipients,
            delivered: counts.delivered,
            read: counts.read,
            readAt: counts.readAt,
            label: ReceiptLabel.text(
                for: counts, in: roster.kind, style: style,
                isViewersMostRecent: isViewersMostRecent, timeZone: timeZone
            )
        )
    }

    /// Each user's first time in `receipts`: the stored arrays are guarded against
    /// repeats, but if one slipped in, the first occurrence is when it really happened.
    private static func earliestTimes(of receipts: [UserReceipt]) -> [String: Date] {
        Dictionary(receipts.map { ($0.userId, $0.at) }, uniquingKeysWith: min)
    }
}
