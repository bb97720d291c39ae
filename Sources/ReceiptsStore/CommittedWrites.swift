import Synchronization

/// Tells this process's event hub that the event log may have grown, right after a write
/// through the store commits, and hands it what a read of the log right behind the write
/// found, when one was made.
///
/// The service's sessions run with `receipts.notify = off` (see
/// `sql/functions/events.sql`): their triggers send no NOTIFY, so the hub learns
/// of this process's writes from here, without a round trip through PostgreSQL.
///
/// A write only yields to the streams registered here (`wake(_:when:)`) and calls the
/// consumer of events (`handEvents(to:)`), where it runs: its task, or a run of batches'
/// task. Nothing runs there but a yield, a registered check of a flag, and the consumer's
/// bookkeeping, and nothing is handed over on the way from a commit to the hub's task, which
/// waits on its stream.
public final class CommittedWrites: Sendable {
    private let streams = Mutex<[(stream: AsyncStream<Void>.Continuation, when: @Sendable () -> Bool)]>([])
    private let consumer = Mutex<(any CommittedEventsConsumer)?>(nil)

    init() {}

    /// Yields to `stream` after every write from now on, while `condition` holds (a check of
    /// a flag, made where the writer runs: a consumer that has nothing to do then is not woken
    /// for nothing). Give it a stream that buffers one element (`.bufferingNewest(1)`): writes
    /// that commit while its consumer works coalesce.
    public func wake(_ stream: AsyncStream<Void>.Continuation, when condition: @escaping @Sendable () -> Bool = { true }) {
        self.streams.withLock { $0.append((stream, condition)) }
    }

    /// Tells `consumer` of every write from now on (the event hub: one at a time).
    public func handEvents(to consumer: any CommittedEventsConsumer) {
        self.consumer.withLock { $0 = consumer }
    }

    /// Where a read of the log right behind a write about to be sent should begin
    /// (`ReceiptsStore.eventLogQuery`), and how many events it takes at most; nil: none.
    func eventsToRead() -> (after: Int64, limit: Int)? {
        self.consumer.withLock { $0 }?.eventsToHandOver()
    }

    /// A write committed.
    func signal() {
        self.consumer.withLock { $0 }?.writeCommitted()
        self.wakeStreams()
    }

    /// A write committed, and a read of the log after `position` right behind it found
    /// `events` (`eventsToRead()`). The consumer may take them in the caller's task.
    func signal(handingOver events: EventLogPage, readAfter position: Int64) async {
        self.wakeStreams()
        await self.consumer.withLock { $0 }?.writeCommitted(handingOver: events, readAfter: position)
    }

    private func wakeStreams() {
        for (stream, condition) in self.streams.withLock({ $0 }) where condition() { stream.yield() }
    }
}

/// What takes this process's committed writes, and the reads of the log made right behind
/// them (`EventHub`).
public protocol CommittedEventsConsumer: AnyObject, Sendable {
    /// Where a read of the log right behind a write about to be sent should begin, and how
    /// many events it takes at most; nil when the consumer would not take them now (it reads
    /// the log itself then).
    func eventsToHandOver() -> (after: Int64, limit: Int)?
    /// A write committed (and no read of the log was made behind it).
    func writeCommitted()
    /// A write committed, and a read of the log after `position` right behind it found
    /// `events` (after asking `eventsToHandOver()`). Runs in the writer's task, which waits
    /// for it: it may take the events there, instead of waking a task of its own.
    func writeCommitted(handingOver events: EventLogPage, readAfter position: Int64) async
}
