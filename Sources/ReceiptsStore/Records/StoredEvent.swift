import Foundation
import Postgres

/// One row of the event log.
public struct StoredEvent: Sendable {
    /// Position in the tenant's stream (1, 2, 3, ... in commit order).
    public let id: Int64
    public let type: String
    public let chatId: String
    public let userId: String
    public let messageIds: [String]
    /// Type-specific fields (e.g. `unreadCount`), a JSON object.
    public let data: PostgresJSON
    /// Users whose devices may see the event; the tenant key sees all.
    public let audience: [String]
    public let occurredAt: Date
}

extension StoredEvent {
    init(row: PostgresRow) throws {
        self.id = try row.decode(column: 0)
        self.type = try row.decode(column: 1)
        self.chatId = try row.decode(column: 2)
        self.userId = try row.decode(column: 3)
        self.messageIds = try row.decode(column: 4)
        self.data = try row.decode(column: 5)
        self.audience = try row.decode(column: 6)
        self.occurredAt = try row.decode(column: 7)
    }
}

/// Where a tenant's stream stands.
public struct EventPositions: Sendable {
    /// The newest event's id (0 before the first event).
    public let last: Int64
    /// The oldest retained event's id; nil when none is retained.
    public let oldest: Int64?

    /// Whether a client that saw everything up to `position` can be brought up to date from
    /// the log: the position is not in the future, and nothing after it was pruned.
    public func canResume(after position: Int64) -> Bool {
        guard position >= 0, position <= self.last else { return false }
        if let oldest { return position >= oldest - 1 }
        return position == self.last
    }
}
