import Foundation

/// One recipient's progress with a message: an entry of the single-message endpoint's
/// `recipients`, shown to the sender only.
///
/// This is where a group sender learns *who* read; a hidden read shows as not read, so
/// the list never reveals more than the counts do.
public struct RecipientStatus: Sendable, Hashable {
    /// The recipient.
    public var userId: String
    /// When the message reached one of their devices, or `nil` if it has not yet.
    /// Encoded as JSON `null` rather than left out.
    public var deliveredAt: Date?
    /// When they visibly read it, or `nil` if they have not or their read is hidden.
    /// Encoded as JSON `null` rather than left out.
    public var readAt: Date?

    /// A status from its parts; normally made by `ReceiptRules.recipientStatuses(of:in:)`.
    public init(userId: String, deliveredAt: Date?, readAt: Date?) {
        self.userId = userId
        self.deliveredAt = deliveredAt
        self.readAt = readAt
    }
}
