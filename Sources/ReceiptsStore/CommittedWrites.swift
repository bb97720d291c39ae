import Synchronization

/// Tells this process's event hub that the event log may have grown, right after a write
/// through the store commits.
///
/// The service's sessions run with `receipts.notify = off` (see
/// `sql/functions/events.sql`): their triggers send no NOTIFY, so the hub learns
/// of this process's writes from here, without a round trip through PostgreSQL.
///
/// A write only yields to the streams registered here (`wake(_:)`), where it runs: its task,
/// or a connection's thread for a run of batches. No code of the hub runs there, and nothing
/// is handed over on the way from a commit to the hub's task, which waits on the stream.
public final class CommittedWrites: Sendable {
    private let streams = Mutex<[AsyncStream<Void>.Continuation]>([])

    init() {}

    /// Yields to `stream` after every write from now on. Give it a stream that buffers one
    /// element (`.bufferingNewest(1)`): writes that commit while its consumer works coalesce.
    public func wake(_ stream: AsyncStream<Void>.Continuation) {
        self.streams.withLock { $0.append(stream) }
    }

    func signal() {
        for stream in self.streams.withLock({ $0 }) { stream.yield() }
    }
}
