import Logging
import ReceiptsStore
import ServiceLifecycle

/// Erases users and tenants in the background (sql/functions/erasing.sql): one bounded step
/// a transaction, paced (`PacedWork`: a pause after each step twice as long as it took) so
/// that the work takes at most about a third of the database's time and the requests of
/// others keep their latency.
///
/// One instance at a time does the work: each step takes or renews the lease `erasure` in
/// PostgreSQL for this instance; the others look every `pollInterval` and take over once a
/// stopped holder's lease has expired (`lease`). Everything an erasure still has to do is in
/// tables, so a restart (even `kill -9` mid-step: the step's transaction rolls back) resumes
/// where the last step committed.
struct ErasureService: Service {
    struct Options: Sendable {
        /// Messages of one chat (or a tenant's rows of one table) per step; events: five times as
        /// many ids.
        var batchSize = 1000
        /// Shortest pause between two steps.
        var pause: Duration = .milliseconds(5)
        /// Pause after a step, as a multiple of the time it took.
        var pauseFactor = 2
        /// How long a lease lasts without renewal.
        var lease: Duration = .seconds(5)
        /// How often to look for work when idle or not the holder.
        var pollInterval: Duration = .seconds(2)
    }

    let store: ReceiptsStore
    let signal: WorkSignal
    /// This instance in the lease (its name and a random suffix, unique per run).
    let holder: String
    var options = Options()
    let logger: Logger

    func run() async throws {
        let pacing = PacedWork(pause: self.options.pause, pauseFactor: self.options.pauseFactor, pollInterval: self.options.pollInterval)
        await pacing.run(signal: self.signal, logger: self.logger, failure: "an erasure step failed; it is tried again") {
            let step = try await self.store.erasureStep(holder: self.holder, lease: self.options.lease, batchSize: self.options.batchSize)
            guard case .worked(let tenant, let user, let finished) = step else { return false }
            if finished {
                self.logger.info(
                    user == nil ? "tenant erased" : "user erased",
                    metadata: ["receipts.tenant_id": "\(tenant)", "receipts.user_id": "\(user ?? "")"])
            }
            return true
        }
    }
}
