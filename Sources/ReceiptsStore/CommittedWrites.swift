/// Tells this process's event hub that the event log may have grown, right after a write
/// through the store commits.
///
/// The service's sessions run with `receipts.notify = off` (see
/// `sql/migrations/0004_faster_writes.sql`): their triggers send no NOTIFY, so the hub learns
/// of this process's writes from here, without a round trip through PostgreSQL.
public final class CommittedWrites: Sendable {
    /// One element per burst of commits: signals coalesce while nobody is reading them.
    public let signals: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (self.signals, self.continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    func signal() {
        self.continuation.yield()
    }
}
