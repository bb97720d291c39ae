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
///
/// A call can stall: it may wait on a row lock, held by a read-all of the same chat or by an
/// open transaction in psql. So while requests wait, a watch looks every `stallAfter`: when
/// no call of the tenant has started a batch for that long, it starts one more beside them,
/// up to `maximumConcurrentBatches`, for the waiting requests whose keys are free.
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
        /// When a call of the tenant last started a batch.
        var lastBatchStart: [String: ContinuousClock.Instant] = [:]
        /// The tenants with a stall watch under way.
        var watched: Set<String> = []
        /// The tenant and key of every request in a call under way.
        var busy: Set<[String]> = []
    }

    /// What a request does after joining the queue.
    private enum Next {
        case startCall, startWatch, wait
    }

    let maximumBatch: Int
    /// Calls of one tenant at a time. One: while it runs, the next batch gathers, and fewer,
    /// larger batches share more of the per-call work (a transaction, the triggers, the
    /// commit, the event hub's read). On the 2-core bench machine, five interleaved pairs:
    /// one made 5,217-5,510 sends/s in four, 3,632 in one; two made 4,133-4,320 (BENCHMARKS.md,
    /// third round). Other tenants' calls run beside it.
    let concurrentBatches: Int
    /// Calls of one tenant at a time when some stall.
    let maximumConcurrentBatches: Int
    /// How long calls may go without starting a batch before one more starts: several times
    /// what a batch took in the bench (about 4 ms for 16 reads), short beside a client's
    /// timeout.
    let stallAfter: Duration
    private let key: @Sendable (Request) -> [String]
    private let state = Mutex(State())

    /// - Parameter key: requests with equal keys never share a batch or run at once.
    init(
        maximumBatch: Int = 100,
        concurrentBatches: Int = 1,
        maximumConcurrentBatches: Int = 4,
        stallAfter: Duration = .milliseconds(50),
        key: @escaping @Sendable (Request) -> [String]
    ) {
        self.maximumBatch = maximumBatch
        self.concurrentBatches = concurrentBatches
        self.maximumConcurrentBatches = max(concurrentBatches, maximumConcurrentBatches)
        self.stallAfter = stallAfter
        self.key = key
    }

    /// Does `request` in a batch of `tenant`'s; `run` does the batches if this request
    /// starts a run of them.
    func submit(_ request: Request, tenant: String, run: @escaping Run) async throws -> Outcome {
        let key = [tenant] + self.key(request)
        return try await withCheckedThrowingContinuation { reply in
            let next = self.state.withLock { state -> Next in
                state.waiting[tenant, default: []].append(Waiting(request: request, key: key, reply: reply))
                if state.running[tenant, default: 0] < self.concurrentBatches {
                    state.running[tenant, default: 0] += 1
                    return .startCall
                }
                return state.watched.insert(tenant).inserted ? .startWatch : .wait
            }
            switch next {
            case .startCall: Task { await self.drain(tenant, run: run) }
            case .startWatch: Task { await self.watchForStalls(of: tenant, run: run) }
            case .wait: break
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
            guard batch.isEmpty else {
                state.lastBatchStart[tenant] = .now
                return batch
            }
            state.running[tenant, default: 1] -= 1
            if state.running[tenant] == 0 {
                state.running[tenant] = nil
                state.lastBatchStart[tenant] = nil
            }
            return nil
        }
    }

    /// While requests of the tenant wait, starts one more call whenever the calls under way
    /// have started no batch for `stallAfter`.
    private func watchForStalls(of tenant: String, run: @escaping Run) async {
        while true {
            try? await Task.sleep(for: self.stallAfter)
            let startsCall = self.state.withLock { state -> Bool? in
                guard state.waiting[tenant] != nil else {
                    state.watched.remove(tenant)
                    return nil
                }
                let running = state.running[tenant, default: 0]
                let stalled = state.lastBatchStart[tenant].map { ContinuousClock.now - $0 >= self.stallAfter } ?? true
                guard running < self.maximumConcurrentBatches, stalled else { return false }
                state.running[tenant] = running + 1
                return true
            }
            switch startsCall {
            case nil: return
            case true?: Task { await self.drain(tenant, run: run) }
            case false?: continue
            }
        }
    }
}

/// A batch call answered another number of outcomes than it had requests (a bug).
struct CountMismatch: Error, CustomStringConvertible {
    let requests: Int
    let outcomes: Int
    var description: String { "a batch call answered \(self.outcomes) outcomes for \(self.requests) requests" }
}
