import Postgres

extension ReceiptsStore {
    /// The tenant's events after `position`, oldest first.
    public func events(tenant: String, after position: Int64, limit: Int) async throws -> [StoredEvent] {
        let rows = try await self.query(
            """
            SELECT event_id, type, chat_id, user_id, message_ids, data, audience, occurred_at
            FROM receipts.events_after($1, $2, $3)
            """,
            [tenant, position, Int32(limit)]
        )
        return try rows.map(StoredEvent.init(row:))
    }

    /// The newest and oldest retained event ids of the tenant.
    public func eventPositions(tenant: String) async throws -> EventPositions {
        let row = try await self.query("SELECT last_event_id, oldest_event_id FROM receipts.event_positions($1)", [tenant])[0]
        return EventPositions(last: try row.decode(column: 0), oldest: try row.decode(column: 1))
    }

    /// Deletes events older than `retentionSeconds`; returns how many.
    public func pruneEvents(olderThanSeconds retentionSeconds: Int) async throws -> Int {
        try await self.query("SELECT receipts.prune_events(make_interval(secs => $1))", [Double(retentionSeconds)])
            .scalar(Int.self)
    }
}
