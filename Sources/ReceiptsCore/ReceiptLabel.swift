import Foundation

/// The wording of a receipt in each `LabelStyle` (the OpenAPI document, parameter `labels`).
///
/// Kept apart from the counting: the styles only differ in what they say about the same
/// numbers, and product changes to wording should not touch the receipt rules.
enum ReceiptLabel {
    /// The label for `counts` in a chat of `kind`; `nil` where the style shows nothing.
    ///
    /// - Parameters:
    ///   - isViewersMostRecent: whether this is the viewer's latest message; the iMessage
    ///     style labels only that one.
    ///   - timeZone: where "Read at 5:42 PM" is told, as the viewer asked.
    static func text(
        for counts: ReceiptCounts,
        in kind: ChatKind,
        style: LabelStyle,
        isViewersMostRecent: Bool,
        timeZone: TimeZone
    ) -> String? {
        switch style {
        case .counts:
            countsText(for: counts, in: kind)
        case .ticks:
            ticksText(for: counts.state)
        case .imessage:
            isViewersMostRecent ? imessageText(for: counts, in: kind, timeZone: timeZone) : nil
        }
    }

    /// "Delivered" until someone reads (also with no recipients at all), then "Read" in a
    /// direct chat, "Read by X/Y" in a group and "Read by all" once everyone has.
    private static func countsText(for counts: ReceiptCounts, in kind: ChatKind) -> String {
        guard counts.read > 0 else { return "Delivered" }
        switch kind {
        case .direct:
            return "Read"
        case .group:
            return counts.isReadByAll ? "Read by all" : "Read by \(counts.read)/\(counts.recipients)"
        }
    }

    /// One word per state, like tick marks: a group message is "Read" only when all read.
    private static func ticksText(for state: ReceiptState) -> String {
        switch state {
        case .sent: "Sent"
        case .delivered: "Delivered"
        case .read: "Read"
        }
    }

    /// Nothing until every recipient has the message, then "Delivered"; once read,
    /// "Read at 5:42 PM" in a direct chat and "Read by some users" / "Read by all users"
    /// in a group. A direct chat partly read cannot happen (it has one recipient); it
    /// shows nothing rather than a claim that is not true.
    private static func imessageText(for counts: ReceiptCounts, in kind: ChatKind, timeZone: TimeZone) -> String? {
        guard counts.isDeliveredToAll else { return nil }
        guard counts.read > 0 else { return "Delivered" }
        switch kind {
        case .direct:
            guard let readAt = counts.readAt else { return nil }
            return "Read at \(clockTime(of: readAt, in: timeZone))"
        case .group:
            return counts.isReadByAll ? "Read by all users" : "Read by some users"
        }
    }

    /// "5:42 PM": 12-hour clock, no leading zero on the hour, in `timeZone`.
    ///
    /// `DateFormatter` is neither `Sendable` nor safe to share between threads, so each
    /// call makes its own; only one message per page carries this label, so the cost is
    /// one formatter per request at most.
    private static func clockTime(of date: Date, in timeZone: TimeZone) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.calendar = Calendar(identifier: .gregorian)
        formatter.timeZone = timeZone
        formatter.dateFormat = "h:mm a"
        return formatter.string(from: date)
    }
}
