import Foundation
import ReceiptsCore

/// A chat with its current members, as stored.
public struct ChatRecord: Sendable {
    /// A current member and when their membership began.
    public struct Member: Sendable, Hashable {
        public let userId: String
        public let joinedAt: Date
    }

    public let id: String
    public let kind: ChatKind
    public let createdAt: Date
    /// Current members, ordered by user id.
    public let members: [Member]
}
