import Synchronization

/// Tells this process's event hub that the event log may have grown, right after a write
/// through the store commits.
///
/// The service's sessions run with `receipts.notify = off` (see
/// `sql/functions/events.sql`): their triggers send no NOTIFY, so the hub learns
/// of this process's writes from here, without a round trip through PostgreSQL.
public final class CommittedWrites: Sendable {
    private let observers = Mutex<[@Sendable () -> Void]>([])

    init() {}

    /// Calls `observer` after every write, at once, where the writer runs: its task, or a
    /// connection's thread for a run of batches. No hand-over on the way from a commit to the
    /// event hub, so an observer only passes the news on (say, yields to an `AsyncStream`
    /// that coalesces) and returns.
    public func observe(_ observer: @escaping @Sendable () -> Void) {
        self.observers.withLock { $0.append(observer) }
    }

    func signal() {
        for observer in self.observers.withLock({ $0 }) { observer() }
    }
}
