/// Where the event log's reader stands in the log, and what it makes of each read: the cursor
/// (`EventLogCursor`, which never moves past an event that may still commit), the event
/// history its positions are in (`EventHistory`), and how long it has waited at a missing id.
///
/// No I/O and no clock of its own: `EventLogReader` reads the log and the running writers,
/// passes what it read and the time, and carries out what this answers. The reader holds it
/// under one lock with its mirror (the hub's `EventFanOut`), because the feeds' memory starts
/// where the cursor stands.
struct EventLogFollower {
    /// How long the reader waits at a missing event id before it abandons it
    /// (`EventLogReader.Options.abandonGapsAfter`).
    let abandonGapsAfter: Duration
    /// Nil until the reader has looked at the log for the first time, and again after the
    /// database went on to another event history, until it looks again.
    private(set) var cursor: EventLogCursor?
    /// The event histories that led to the one the cursor's positions are in (nil until
    /// the reader has looked at the log for the first time).
    private(set) var history: EventHistory?
    /// Where the cursor has been waiting (`EventLogCursor.waitingAt`) since when; nil
    /// while it does not wait.
    private var waitStarted: (at: Int64, since: ContinuousClock.Instant)?
    /// Since when the reader, not started yet, has found a writer without a transaction id.
    private var startBlockedSince: ContinuousClock.Instant?

    init(abandonGapsAfter: Duration) {
        self.abandonGapsAfter = abandonGapsAfter
    }

    /// The cursor's position, once it has settled where it stands (every event up to it has
    /// committed, or never will), and the histories it is of.
    var ready: (position: Int64, history: EventHistory)? {
        guard let cursor = self.cursor, cursor.isReady, let history = self.history else { return nil }
        return (cursor.position, history)
    }

    /// Whether the reader must find where it stands (the first look, or after a failover).
    var needsStart: Bool { self.cursor == nil }

    /// Whether `historyId` is the history the follower's positions are in.
    func isIn(_ historyId: String) -> Bool { self.history?.currentId == historyId }

    /// Starts after `newest`, the newest event of history `historyId`, given the writers of the
    /// log asked after reading it (whatever may still commit a lower id is among them).
    ///
    /// - Returns: false when a writer has no transaction id yet: ask again, until
    ///   `abandonGapsAfter` has passed since the first such answer; past it, such a writer is
    ///   waited for as a transaction that never finishes, already overdue, so the next look
    ///   abandons what it may hold.
    mutating func start(after newest: Int64, in historyId: String, writers: EventWriters, now: ContinuousClock.Instant) -> Bool {
        var blockedSince: ContinuousClock.Instant?
        if writers.hasWriterWithoutTransaction {
            if self.startBlockedSince == nil { self.startBlockedSince = now }
            blockedSince = self.startBlockedSince
        }
        if let blockedSince, now - blockedSince < self.abandonGapsAfter { return false }
        // Another look may have started meanwhile, or the history moved on: then nothing to do.
        guard self.cursor == nil, self.isIn(historyId) else { return true }
        let never: Set<Int64> = blockedSince == nil ? [] : [Int64.max]
        self.cursor = EventLogCursor(after: newest, running: writers.transactions.union(never))
        if let blockedSince { self.waitStarted = (newest, blockedSince) }
        return true
    }

    /// Takes a page of the log read after `from`, in history `page.history`.
    ///
    /// - Returns: the events accepted, in id order, and the cursor after them; nil when the
    ///   page is no longer of use (another read moved on meanwhile, or it is of another history).
    mutating func accept(_ page: EventLogPage, readAfter from: Int64) -> (events: [StoredEvent], cursor: EventLogCursor)? {
        guard var cursor = self.cursor, cursor.position == from, self.isIn(page.history) else { return nil }
        let accepted = cursor.advance(with: page)
        self.cursor = cursor
        if !cursor.isWaiting { self.waitStarted = nil }
        return (accepted, cursor)
    }

    /// Takes a read of the log after `from` made right behind a write (`EventLogReader.handOver`),
    /// only when they follow on from the cursor with no id missing: the cursor is settled and
    /// waits for nothing, stands at `from`, and the ids are `from + 1`, `from + 2`, … in the
    /// history it follows. Such a read was made in a snapshot that is not the reader's, so it is
    /// never asked about gaps.
    ///
    /// - Returns: as `accept(_:readAfter:)`; nil when the events do not follow on.
    mutating func acceptWhole(_ page: EventLogPage, readAfter from: Int64) -> (events: [StoredEvent], cursor: EventLogCursor)? {
        guard let cursor = self.cursor, cursor.isReady, !cursor.isWaiting, cursor.position == from else { return nil }
        for (offset, event) in page.events.enumerated() where event.id != from + 1 + Int64(offset) { return nil }
        return self.accept(page, readAfter: from)
    }

    /// The transactions running after the read that found the gap the cursor waits at.
    mutating func waitForGap(on transactions: Set<Int64>) {
        self.cursor?.waitForGap(on: transactions)
    }

    /// An abandonment of missing ids that is due at `now`: the cursor has waited at the same
    /// id for `abandonGapsAfter` (100 ms when it waits for a transaction given up on before,
    /// still open: a gap that a running writer fills closes within a commit, far sooner, so
    /// gaps that fill are not abandoned for nothing). Starts the clock of a new wait.
    ///
    /// - Returns: where the gap starts, the id to abandon through, and how long it was waited
    ///   for; nil when none is due.
    mutating func overdueWait(at now: ContinuousClock.Instant) -> (gap: Int64?, target: Int64, waited: Duration)? {
        guard let cursor = self.cursor, let at = cursor.waitingAt else {
            self.waitStarted = nil
            return nil
        }
        guard let started = self.waitStarted, started.at == at else {
            self.waitStarted = (at, now)
            return nil
        }
        let waited = now - started.since
        let deadline = cursor.waitsForAbandonedWriter ? min(self.abandonGapsAfter, .milliseconds(100)) : self.abandonGapsAfter
        guard waited >= deadline else { return nil }
        self.waitStarted = (at, now)
        return (cursor.gapStart, cursor.abandonmentTarget, waited)
    }

    /// Missing ids up to `horizon` were abandoned by `transaction` (`ReceiptsStore.abandonEventIds`).
    mutating func abandoned(through horizon: Int64, transaction: Int64) {
        self.cursor?.abandon(through: horizon, transaction: transaction)
    }

    /// Takes `history` (the lineage the database reports now). After the first look, a new
    /// one means the database went on to another history (a failover or a restore): the
    /// cursor starts again as at start.
    ///
    /// - Returns: the history before, when this is another one.
    mutating func follow(_ history: EventHistory) -> EventHistory? {
        guard let previous = self.history else {
            self.history = history
            return nil
        }
        guard previous.currentId != history.currentId else { return nil }
        self.history = history
        self.cursor = nil
        self.waitStarted = nil
        self.startBlockedSince = nil
        return previous
    }
}
