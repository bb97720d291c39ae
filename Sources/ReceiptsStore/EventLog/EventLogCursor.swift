/// Follows the event log in id order without ever skipping an event that commits late.
///
/// Event ids come from one sequence, but transactions commit out of order: id 7 can be
/// visible while id 6 is still in flight. The cursor's `position` only moves past a missing
/// id once that id can no longer appear. Its writer took a transaction id before the event
/// id, and a later id had committed before the read that found the gap, so the writer was
/// running then (or had rolled back). The owner asks PostgreSQL which transactions are
/// running right after that read (`ReceiptsStore.eventWriters()`: the transactions of this
/// database that hold a write lock on the event log, which every transaction holding an
/// event id does; a snapshot would list only those below its xmax, and strangers too) and
/// hands them to `waitForGap(on:)`; once every one of them has finished, the missing id either
/// became visible or was rolled back for good.
///
/// So "everything up to `position`" is exact, which is what stream ids promise a client
/// that resumes. A gap usually closes within a commit or two; a cursor that waits reports
/// `isWaiting` so its owner reads again soon even without a notification (a rollback sends
/// none).
///
/// A wait that lasts too long (a transaction left open in psql) is ended by abandoning the
/// missing ids (`ReceiptsStore.abandonEventIds`, sql/functions/events.sql): once a
/// read's snapshot shows the abandoning call finished, every id up to its horizon that is still
/// missing never becomes visible (a late writer moves its events to fresh, higher ids as it
/// commits), and `abandon(through:transaction:)` lets the cursor step over them.
struct EventLogCursor: Sendable {
    /// Every event with an id up to here has been accepted, or will never be visible.
    private(set) var position: Int64
    /// At start, the transactions that may still commit ids below `position`.
    private var startingWaitsFor: Set<Int64>?
    /// The first missing id after `position`, and the transactions it waits for (nil until
    /// the owner has said which were running).
    private var gap: (start: Int64, waitsFor: Set<Int64>?)?
    /// The newest id a read has shown: how far an abandonment reaches (`abandonmentTarget`).
    private var newestSeen: Int64
    /// The last abandonment: missing ids up to `through` are gone for reads whose snapshot
    /// shows `transaction` (the abandoning call) finished.
    private var abandonment: (through: Int64, transaction: Int64)?
    /// The transactions an abandonment gave up on that had not finished at the last read: a
    /// gap that waits for one of them again need not wait the whole deadline again.
    private var abandonedWriters: Set<Int64> = []
    /// Whether the last read left the gap waiting for one of `abandonedWriters`.
    private(set) var waitsForAbandonedWriter = false

    /// A cursor after `newestVisible`, ready once `running` (the transactions running when
    /// it was looked up, which may hold lower ids) have finished.
    init(after newestVisible: Int64, running: Set<Int64>) {
        self.position = newestVisible
        self.newestSeen = newestVisible
        self.startingWaitsFor = running.isEmpty ? nil : running
    }

    /// Whether `position` can be handed out: the start has settled.
    var isReady: Bool { self.startingWaitsFor == nil }

    /// Whether the cursor waits for running transactions, and should read again soon.
    var isWaiting: Bool { self.startingWaitsFor != nil || self.gap != nil }

    /// The first missing id the cursor waits at, if it waits at a gap.
    var gapStart: Int64? { self.gap?.start }

    /// Where the cursor waits, if it does: the missing id of its gap, or its position while
    /// the start settles. A new wait starts when this changes.
    var waitingAt: Int64? {
        if let gap { return gap.start }
        return self.startingWaitsFor == nil ? nil : self.position
    }

    /// The horizon to abandon when the wait is too long: the newest id seen (every missing id
    /// below it is waited for), the position itself while the start settles.
    var abandonmentTarget: Int64 { max(self.position, self.newestSeen) }

    /// Whether the cursor found a gap and needs to know what was running (`waitForGap(on:)`).
    var needsRunningTransactions: Bool { self.gap != nil && self.gap?.waitsFor == nil }

    /// Takes a read of the events after `position`; returns those that are now in order,
    /// oldest first, and moves past them.
    mutating func advance(with page: EventLogPage) -> [StoredEvent] {
        // Missing ids up to here will never be visible, if this read came after the abandoning call.
        let abandoned = self.abandonment.flatMap { page.snapshot.hasFinished($0.transaction) ? $0.through : nil } ?? 0
        if let newest = page.events.last?.id { self.newestSeen = max(self.newestSeen, newest) }
        if let waitsFor = self.startingWaitsFor {
            guard page.snapshot.hasFinished(all: waitsFor) || abandoned >= self.position else { return [] }
            self.startingWaitsFor = nil
        }
        var accepted: [StoredEvent] = []
        for event in page.events where event.id > self.position {
            if event.id != self.position + 1, self.position < abandoned {
                // Only missing ids lie between: `event` is the next visible one.
                self.position = min(abandoned, event.id - 1)
            }
            if event.id != self.position + 1 {
                guard let gap, gap.start == self.position + 1 else {
                    self.gap = (self.position + 1, nil)
                    break
                }
                guard let waitsFor = gap.waitsFor, page.snapshot.hasFinished(all: waitsFor) else { break }
                // Everything that could have filled the gap has finished: it was rolled back.
            }
            accepted.append(event)
            self.position = event.id
        }
        if let gap, gap.start <= self.position { self.gap = nil }
        self.abandonedWriters = self.abandonedWriters.filter { !page.snapshot.hasFinished($0) }
        self.waitsForAbandonedWriter = !(self.gap?.waitsFor?.isDisjoint(with: self.abandonedWriters) ?? true)
        return accepted
    }

    /// Records what the gap found by the last `advance` waits for: the transactions running
    /// after that read.
    mutating func waitForGap(on running: Set<Int64>) {
        guard let gap, gap.waitsFor == nil else { return }
        self.gap = (gap.start, running)
    }

    /// Records that `receipts.abandon_event_ids` returned: ids up to `horizon` still missing in
    /// a read whose snapshot shows `transaction` finished will never be visible.
    mutating func abandon(through horizon: Int64, transaction: Int64) {
        self.abandonedWriters.formUnion(self.gap?.waitsFor ?? self.startingWaitsFor ?? [])
        self.waitsForAbandonedWriter = false
        if let current = self.abandonment, current.through >= horizon { return }
        self.abandonment = (horizon, transaction)
    }
}
