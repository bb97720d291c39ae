import Foundation

/// One user's delivery or read of a message, and when it happened.
///
/// The database keeps receipts as parallel arrays (`read_by` with `read_at`); this pairs
/// them so the rules never index two arrays in step.
public struct UserReceipt: Sendable, Hashable {
    /// Who received or read the message.
    public var userId: String
    /// When they did.
    public var at: Date

    /// A receipt of `userId` at `at`.
    public init(userId: String, at: Date) {
        self.userId = userId
        self.at = at
    }
}
