/// A message's receipt data as stored (the parallel arrays zipped).
///
/// This is the raw material: it may mention users who are no longer recipients (they
/// left without reading) and, defensively, even the sender. The rules decide what of it
/// counts, so callers pass it along unfiltered.
public struct MessageReceipts: Sendable {
    /// The message's position in its chat; compared with membership periods.
    public var seq: Int64
    /// The author, who is never a recipient of their own message.
    public var senderId: String
    /// `delivered_to` with `delivered_at`. Deliveries are always visible.
    public var deliveries: [UserReceipt]
    /// `read_by` with `read_at`: reads made with receipts switched on.
    public var visibleReads: [UserReceipt]
    /// `hidden_read_by`: users who read with receipts switched off. Their reads are never
    /// shown, so only their membership (and delivery) is known to the rules.
    public var hiddenReaders: Set<String>

    /// A message's receipts from their stored parts.
    public init(
        seq: Int64,
        senderId: String,
        deliveries: [UserReceipt],
        visibleReads: [UserReceipt],
        hiddenReaders: Set<String>
    ) {
        self.seq = seq
        self.senderId = senderId
        self.deliveries = deliveries
        self.visibleReads = visibleReads
        self.hiddenReaders = hiddenReaders
    }
}
