import Foundation

/// A message's receipt data as stored.
///
/// This is the raw material: it may mention users who are no longer recipients (they
/// left without reading) and, defensively, even the sender. The rules decide what of it
/// counts, so callers pass it along unfiltered.
public struct MessageReceipts: Sendable {
    /// The message's position in its chat; compared with membership periods.
    public var seq: Int64
    /// The author, who is never a recipient of their own message.
    public var senderId: String
    /// `delivered_to`: who it was delivered to. Deliveries are always visible.
    public var deliveredTo: [String]
    /// `delivered_at`, in step with `deliveredTo`.
    public var deliveredAt: [Date]
    /// `read_by` with `read_at`: reads made with receipts switched on.
    public var visibleReads: [UserReceipt]
    /// `hidden_read_by`: users who read with receipts switched off. Their reads are never
    /// shown, so only their membership (and delivery) is known to the rules.
    public var hiddenReaders: Set<String>

    /// A message's receipts from their stored parts, delivery times included.
    public init(
        seq: Int64,
        senderId: String,
        deliveries: [UserReceipt],
        visibleReads: [UserReceipt],
        hiddenReaders: Set<String>
    ) {
        self.init(
            seq: seq, senderId: senderId, deliveredTo: deliveries.map(\.userId), deliveredAt: deliveries.map(\.at),
            visibleReads: visibleReads, hiddenReaders: hiddenReaders)
    }

    /// A message's receipts from their stored parts, the delivery times in step with `deliveredTo`.
    public init(
        seq: Int64,
        senderId: String,
        deliveredTo: [String],
        deliveredAt: [Date],
        visibleReads: [UserReceipt],
        hiddenReaders: Set<String>
    ) {
        precondition(deliveredAt.count == deliveredTo.count, "a delivery time for each delivery")
        self.seq = seq
        self.senderId = senderId
        self.deliveredTo = deliveredTo
        self.deliveredAt = deliveredAt
        self.visibleReads = visibleReads
        self.hiddenReaders = hiddenReaders
    }

    /// The deliveries with their times.
    public var deliveries: [UserReceipt] {
        get {
            zip(self.deliveredTo, self.deliveredAt).map { UserReceipt(userId: $0, at: $1) }
        }
        set {
            self.deliveredTo = newValue.map(\.userId)
            self.deliveredAt = newValue.map(\.at)
        }
    }
}
