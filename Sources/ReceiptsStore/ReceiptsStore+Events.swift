import Postgres

extension ReceiptsStore {
    /// Every tenant's visible events after `position`, in id order, with the current event
    /// history (a new one may begin with this read: sql/functions/histories.sql) and the
    /// snapshot that decided what is visible (for the hub's listener; beyond row-level security).
    public func eventLog(after position: Int64, limit: Int) async throws -> EventLogPage {
        try EventLogPage(try await self.query(Self.eventLogQuery(after: position, limit: limit)))
    }

    /// The statement of `eventLog(after:limit:)`: its rows make an `EventLogPage`.
    static func eventLogQuery(after position: Int64, limit: Int) -> PostgresQuery {
        """
        SELECT history_id, snapshot, event_id, transaction_id, tenant_id, type, chat_id, user_id, message_ids, data,
               audience, audience_version, occurred_at, trace_parent
        FROM receipts.events_since(\(position), \(Int32(limit)))
        """
    }

    /// The current event history, the newest visible event id (0 when there is none) and the
    /// snapshot it was read in: where the hub starts.
    public func newestEvent() async throws -> (history: String, id: Int64, snapshot: TransactionSnapshot) {
        let row = try await self.query("SELECT history_id, snapshot, newest_visible FROM receipts.newest_event()")[0]
        let (history, snapshotText, newest) = try row.decode((String, String, Int64).self)
        guard let snapshot = TransactionSnapshot(snapshotText) else {
            throw PostgresError(code: .invalidValue, message: "receipts.newest_event returned no snapshot")
        }
        return (history, newest, snapshot)
    }

    /// The W3C traceparent of each of `events` of `tenant` that has one (written by a traced
    /// batch: `ReceiptsTracing`), by event id.
    public func eventTraceParents(tenant: String, events: [Int64]) async throws -> [Int64: String] {
        let rows = try await self.query("SELECT event_id, trace_parent FROM receipts.event_trace_parents(\(tenant), \(events))")
        var parents: [Int64: String] = [:]
        for (event, parent) in try rows.decode((Int64, String).self) { parents[event] = parent }
        return parents
    }

    /// Where a new stream of `tenant` stands now.
    public func eventLogPosition(tenant: String) async throws -> EventLogPosition {
        let row = try await self.query(
            "SELECT history_id, snapshot, last_allocated, pruned_through FROM receipts.stream_position(\(tenant))"
        )[0]
        let (history, snapshotText, lastAllocated, prunedThrough) = try row.decode((String, String, Int64, Int64).self)
        guard let snapshot = TransactionSnapshot(snapshotText) else {
            throw PostgresError(code: .invalidValue, message: "receipts.stream_position returned no snapshot")
        }
        return EventLogPosition(history: history, snapshot: snapshot, lastAllocated: lastAllocated, prunedThrough: prunedThrough)
    }

    /// The event histories that led to the current one, oldest first (the last is the current
    /// one; a new one may begin with this read).
    public func eventHistory() async throws -> EventHistory {
        let rows = try await self.query("SELECT history_id, started_after, resumable_through FROM receipts.event_history_lineage()")
        let segments = try rows.map { row in
            let (id, startedAfter, resumableThrough) = try row.decode((String, Int64, Int64).self)
            return EventHistory.Segment(id: id, startedAfter: startedAfter, resumableThrough: resumableThrough)
        }
        guard !segments.isEmpty else {
            throw PostgresError(code: .invalidValue, message: "receipts.event_history_lineage returned no history")
        }
        return EventHistory(segments: segments)
    }

    /// Records that every event up to `position` of history `history` was visible (the hub
    /// calls it about once a second): where the next history, after a failover, starts
    /// checking what it kept. False (nothing written) when the database has gone on to
    /// another history. Its commit is not waited for on disk: a record lost in a crash only
    /// makes the next history look further back.
    @discardableResult
    public func settleEventHistory(_ history: String, through position: Int64) async throws -> Bool {
        let rows = try await self.query(
            "SELECT receipts.settle_event_history(\(history), \(position)), set_config('synchronous_commit', 'off', true)")
        return try rows.scalar(Bool.self)
    }

    /// Every transaction that has an id and is running now. A snapshot lists running
    /// transactions only below its xmax; this finds the newer ones too (from `pg_locks`).
    public func runningTransactions() async throws -> Set<Int64> {
        Set(try await self.query("SELECT receipts.running_transactions()").scalar([Int64].self))
    }

    /// The transactions of this database that may still commit an event: those holding a
    /// write lock on the event log (see sql/functions/events.sql).
    /// Unlike `runningTransactions()`, transactions of other databases of the cluster and
    /// sessions that never wrote an event are not among them.
    public func eventWriters() async throws -> EventWriters {
        let rows = try await self.query("SELECT transaction_id, pid FROM receipts.event_writers()")
        var writers = EventWriters(transactions: [], pids: [], hasWriterWithoutTransaction: false)
        for (transaction, pid) in try rows.decode((Int64?, Int32?).self) {
            if let transaction {
                writers.transactions.insert(transaction)
            } else {
                writers.hasWriterWithoutTransaction = true
            }
            if let pid { writers.pids.append(pid) }
        }
        return writers
    }

    /// Gives up waiting for the event ids up to `position` that are still missing (see
    /// sql/functions/events.sql): a transaction that commits one of them later moves
    /// its events to fresh ids. Waits at most 200 ms for writers that are committing right
    /// now (then throws, and nothing was abandoned that a reader may rely on).
    ///
    /// - Returns: the horizon (every id up to it that is missing in a read after this call is
    ///   gone; never beyond the last id handed out) and the call's transaction id: a read whose
    ///   snapshot shows it finished came after the call.
    public func abandonEventIds(through position: Int64) async throws -> (horizon: Int64, transaction: Int64) {
        let row = try await self.query(
            "SELECT abandoned_through, transaction_id FROM receipts.abandon_event_ids(\(position))")[0]
        return try row.decode((Int64, Int64).self)
    }

    /// The unread totals of each of `users` (`receipts.unread_totals`), which `unread.changed`
    /// carries as it is delivered; a user in no chat has zeros.
    public func unreadTotals(tenant: String, users: Set<String>) async throws -> [String: UnreadTotals] {
        let rows = try await self.query(
            "SELECT user_id, total, mentions FROM receipts.unread_totals(\(tenant), \(Array(users)))")
        var totals: [String: UnreadTotals] = [:]
        for (user, total, mentions) in try rows.decode((String, Int, Int).self) {
            totals[user] = UnreadTotals(total: total, mentions: mentions)
        }
        return totals
    }

    /// The tenant's events in `(position, through]`, oldest first (what a resuming stream
    /// replays; every event up to `through` has committed).
    public func events(tenant: String, after position: Int64, through: Int64, limit: Int) async throws -> [StoredEvent] {
        let rows = try await self.query(
            """
            SELECT event_id, transaction_id, tenant_id, type, chat_id, user_id, message_ids, data, audience,
                   audience_version, occurred_at
            FROM receipts.events_after(\(tenant), \(position), \(through), \(Int32(limit)))
            """
        )
        return try StoredEvent.all(in: rows)
    }

    /// As `events(tenant:after:through:limit:)`, with the current event history and the newest
    /// id of the tenant's events that retention deleted, read in the same snapshot: when it is
    /// past `position`, events the caller needs may be gone from the page; when the history is
    /// not the caller's, the ids are of another history (a failover).
    public func retainedEvents(
        tenant: String, after position: Int64, through: Int64, limit: Int
    ) async throws -> (history: String, events: [StoredEvent], prunedThrough: Int64) {
        let rows = try await self.query(
            """
            SELECT history_id, pruned_through, event_id, transaction_id, tenant_id, type, chat_id, user_id, message_ids, data,
                   audience, audience_version, occurred_at
            FROM receipts.retained_events_after(\(tenant), \(position), \(through), \(Int32(limit)))
            """
        )
        guard let first = rows.first else {
            throw PostgresError(code: .invalidValue, message: "receipts.retained_events_after returned no row")
        }
        return (try first.decode(String.self, column: "history_id"), try StoredEvent.all(in: rows), try first.decode(Int64.self, column: "pruned_through"))
    }

    /// Wakes the event listeners of every instance with one NOTIFY carrying `payload`. A
    /// notifying transaction holds a database-wide lock until its commit is flushed, so this
    /// one does not wait for the flush: a NOTIFY lost in a crash loses nothing (the events
    /// are in the log, and a listener reads it again when it reconnects).
    public func notifyListeners(payload: String) async throws {
        _ = try await self.query(
            "SELECT set_config('synchronous_commit', 'off', true), pg_notify(\(Self.eventChannel), \(payload))")
    }

    /// Deletes events older than `retentionSeconds`; returns how many.
    public func pruneEvents(olderThanSeconds retentionSeconds: Int) async throws -> Int {
        try await self.maintenanceQuery("SELECT receipts.prune_events(make_interval(secs => \(Double(retentionSeconds))))")
            .scalar(Int.self)
    }
}
