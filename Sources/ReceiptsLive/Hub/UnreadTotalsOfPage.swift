import ReceiptsStore

/// The user totals that the `unread.changed` events of a page of the log carry as they are
/// delivered (`total`, `badge`, `totalMentions`, `mentionsBadge`): read once per user and
/// page, and only for the users some stream or webhook sees, so the write path never sums a
/// user's chats (`receipts.unread_totals`).
struct UnreadTotalsOfPage {
    /// A user of a tenant.
    struct User: Hashable {
        let tenant: String
        let user: String
    }

    /// The event type that carries totals.
    static let eventType = "unread.changed"

    private var read: [User: UnreadTotals] = [:]

    /// The totals `event` carries: nil unless it is an `unread.changed` whose user's totals
    /// were read.
    subscript(event: StoredEvent) -> UnreadTotals? {
        guard event.type == Self.eventType, let user = event.userId else { return nil }
        return self.read[User(tenant: event.tenantId, user: user)]
    }

    /// The users of the `unread.changed` events in `events` that `isStreamed` says someone
    /// sees and whose totals were not read yet.
    func missing(in events: [StoredEvent], isStreamed: (_ tenant: String, _ user: String) -> Bool) -> Set<User> {
        var missing = Set<User>()
        for event in events where event.type == Self.eventType {
            guard let user = event.userId else { continue }
            let key = User(tenant: event.tenantId, user: user)
            if self.read[key] == nil && isStreamed(key.tenant, key.user) { missing.insert(key) }
        }
        return missing
    }

    /// The index of the first `unread.changed` in `events` that `isStreamed` says someone
    /// sees (whose totals have to be read before it goes out); nil when there is none.
    static func firstNeedingTotals(in events: [StoredEvent], isStreamed: (_ tenant: String, _ user: String) -> Bool) -> Int? {
        events.firstIndex { event in
            guard event.type == Self.eventType, let user = event.userId else { return false }
            return isStreamed(event.tenantId, user)
        }
    }

    /// Reads the totals of `users`: one query per tenant.
    mutating func read(_ users: Set<User>, from store: ReceiptsStore) async throws {
        for (tenant, users) in Dictionary(grouping: users, by: \.tenant) {
            for (user, totals) in try await store.unreadTotals(tenant: tenant, users: Set(users.map(\.user))) {
                self.read[User(tenant: tenant, user: user)] = totals
            }
        }
    }
}
