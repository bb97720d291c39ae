import Synchronization

/// Gathers a tenant's concurrent requests of one kind into batches, each one call of a SQL
/// function that does them all in one statement and one commit (see
/// `sql/migrations/0004_faster_writes.sql` and `0005_batched_sends.sql`).
///
/// A request that finds fewer than `concurrentBatches` calls of its tenant under way starts
/// one at once, alone, so an idle service adds no wait. Requests that arrive while calls
/// run go together into the next one: up to `maximumBatch`, and never two with the same
/// `key` at a time (so requests on one key follow each other, as separate calls would).
/// Each request gets the outcome the batch call gave it.
final class TenantBatcher<Request: Sendable, Outcome: Sendable>: Sendable {
    /// Does one batch of a tenant's requests; answers one outcome per request, in order.
    typealias Run = @Sendable (_ tenant: String, _ batch: [Request]) async throws -> [Outcome]

    private struct Waiting: Sendable {
        let request: Request
        let key: [String]
        let reply: CheckedContinuation<Outcome, any Error>
    }

    private struct State {
        var waiting: [String: [Waiting]] = [:]
        /// Calls under way, per tenant.
        var running: [String: Int] = [:]
        /// The tenant and key of every request in a call under way.
        var busy: Set<[String]> = []
    }

    let maximumBatch: Int
    /// Calls of one tenant at a time. One: while it runs, the next batch gathers, and fewer,
    /// larger batches share more of the per-call work (a transaction, the triggers, the
    /// commit, the event hub's read). On the 2-core bench machine, five interleaved pairs:
    /// one made 5,217-5,510 sends/s in four, 3,632 in one; two made 4,133-4,320 (BENCHMARKS.md,
    /// third round). Other tenants' calls run beside it.
    let concurrentBatches: Int
    private let key: @Sendable (Request) -> [String]
    private let state = Mutex(State())

    /// - Parameter key: requests with equal keys never share a batch or run at once.
    init(maximumBatch: Int = 100, concurrentBatches: Int = 1, key: @escaping @Sendable (Request) -> [String]) {
        self.maximumBatch = maximumBatch
        self.concurrentBatches = concurrentBatches
        self.key = key
    }

    /// Does `request` in a batch of `tenant`'s; `run` does the batches if this request
    /// starts a run of them.
    func submit(_ request: Request, tenant: String, run: @escaping Run) async throws -> Outcome {
        let key = [tenant] + self.key(request)
        return try await withCheckedThrowingContinuation { reply in
            let starts = self.state.withLock { state in
                state.waiting[tenant, default: []].append(Waiting(request: request, key: key, reply: reply))
                guard state.running[tenant, default: 0] < self.concurrentBatches else { return false }
                state.running[tenant, default: 0] += 1
                return true
            }
            if starts {
                Task { await self.drain(tenant, run: run) }
            }
        }
    }

    /// Runs the tenant's waiting requests, batch after batch, until none is left that another
    /// call is not already doing for the same key.
    private func drain(_ tenant: String, run: Run) async {
        var finished: [Waiting] = []
        while let batch = self.nextBatch(of: tenant, after: finished) {
            do {
                let outcomes = try await run(tenant, batch.map(\.request))
                guard outcomes.count == batch.count else { throw CountMismatch(requests: batch.count, outcomes: outcomes.count) }
                for (waiting, outcome) in zip(batch, outcomes) { waiting.reply.resume(returning: outcome) }
            } catch {
                for waiting in batch { waiting.reply.resume(throwing: error) }
            }
            finished = batch
        }
    }

    /// Releases the keys of the finished batch and takes the next one off the queue, or
    /// ends this call's run when nothing can go.
    private func nextBatch(of tenant: String, after finished: [Waiting]) -> [Waiting]? {
        self.state.withLock { state in
            for waiting in finished { state.busy.remove(waiting.key) }
            var batch: [Waiting] = []
            var later: [Waiting] = []
            for waiting in state.waiting[tenant] ?? [] {
                if batch.count < self.maximumBatch, state.busy.insert(waiting.key).inserted {
                    batch.append(waiting)
                } else {
                    later.append(waiting)
                }
            }
            state.waiting[tenant] = later.isEmpty ? nil : later
            guard batch.isEmpty else { return batch }
            state.running[tenant, default: 1] -= 1
            if state.running[tenant] == 0 { state.running[tenant] = nil }
            return nil
        }
    }
}

/// A batch call answered another number of outcomes than it had requests (a bug).
struct CountMismatch: Error, CustomStringConvertible {
    let requests: Int
    let outcomes: Int
    var description: String { "a batch call answered \(self.outcomes) outcomes for \(self.requests) requests" }
}
