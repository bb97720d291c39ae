/// A user's unread totals over all their current chats, as the top of the unread list gives
/// them (`receipts.unread_totals`).
public struct UnreadTotals: Sendable, Equatable {
    /// Unread messages of the chats the user did not mute.
    public let total: Int
    /// Unread messages that mention the user, in every chat (muted ones included).
    public let mentions: Int

    public init(total: Int, mentions: Int) {
        self.total = total
        self.mentions = mentions
    }
}
