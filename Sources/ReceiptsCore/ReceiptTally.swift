import Foundation

/// A message's deliveries and visible reads taken in one by one, in any order, then counted
/// by the receipt rules (`ReceiptRules.summary(of:…)`): for receipts that arrive in parts, as
/// a page's receipt chunks arrive from the database, each counted as it comes.
///
/// Users are taken by their number in the roster (`ChatRoster.numberedUsers`), so that a
/// caller holding receipts in a form of its own looks each user up its own way, once; or by
/// id. Users the roster does not know are no recipients and are left out. A user who appears
/// twice keeps their earliest read, as in `recipientStatuses`.
public struct ReceiptTally: Sendable {
    let seq: Int64
    let senderId: String
    let roster: ChatRoster
    /// By the roster's user number: whether the message was delivered to them.
    private(set) var isDelivered: [Bool]
    /// By the roster's user number: their earliest visible read.
    private(set) var readAt: [Date?]

    /// A tally of the message with `seq` from `senderId`, in a chat with `roster`.
    public init(seq: Int64, senderId: String, in roster: ChatRoster) {
        self.seq = seq
        self.senderId = senderId
        self.roster = roster
        self.isDelivered = [Bool](repeating: false, count: roster.index.count)
        self.readAt = [Date?](repeating: nil, count: roster.index.count)
    }

    /// Takes in a delivery to the user numbered `number` in the roster (`ChatRoster.numberedUsers`).
    public mutating func delivered(toUserNumber number: Int) {
        self.isDelivered[number] = true
    }

    /// Takes in a visible read at `time` by the user numbered `number` in the roster.
    public mutating func read(byUserNumber number: Int, at time: Date) {
        if let earlier = self.readAt[number], earlier <= time { return }
        self.readAt[number] = time
    }

    /// Takes in a delivery to `userId`; nothing for a user the roster does not know.
    public mutating func delivered(to userId: String) {
        guard let number = self.roster.number(of: userId) else { return }
        self.delivered(toUserNumber: number)
    }

    /// Takes in a visible read by `userId` at `time`; nothing for a user the roster does not know.
    public mutating func read(by userId: String, at time: Date) {
        guard let number = self.roster.number(of: userId) else { return }
        self.read(byUserNumber: number, at: time)
    }

    /// The `receipt` the sender sees under the message, as `ReceiptRules.summary(of:…)` gives it.
    public func summary(style: LabelStyle = .counts, isViewersMostRecent: Bool, timeZone: TimeZone = .gmt) -> ReceiptSummary {
        ReceiptRules.summary(ReceiptCounts(self), in: self.roster, style: style, isViewersMostRecent: isViewersMostRecent, timeZone: timeZone)
    }
}
