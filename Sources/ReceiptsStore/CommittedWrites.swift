import Synchronization

/// Tells this process's event hub that the event log may have grown, right after a write
/// through the store commits.
///
/// The service's sessions run with `receipts.notify = off` (see
/// `sql/functions/events.sql`): their triggers send no NOTIFY, so the hub learns
/// of this process's writes from here, without a round trip through PostgreSQL.
///
/// A write only yields to the streams registered here (`wake(_:when:)`), where it runs: its
/// task, or a run of batches' task. Nothing runs there but a yield (and a
/// registered check of a flag), and nothing is handed over on the way from a commit to the
/// hub's task, which waits on the stream.
public final class CommittedWrites: Sendable {
    private let streams = Mutex<[(stream: AsyncStream<Void>.Continuation, when: @Sendable () -> Bool)]>([])

    init() {}

    /// Yields to `stream` after every write from now on, while `condition` holds (a check of
    /// a flag, made where the writer runs: a consumer that has nothing to do then is not woken
    /// for nothing). Give it a stream that buffers one element (`.bufferingNewest(1)`): writes
    /// that commit while its consumer works coalesce.
    public func wake(_ stream: AsyncStream<Void>.Continuation, when condition: @escaping @Sendable () -> Bool = { true }) {
        self.streams.withLock { $0.append((stream, condition)) }
    }

    func signal() {
        for (stream, condition) in self.streams.withLock({ $0 }) where condition() { stream.yield() }
    }
}
