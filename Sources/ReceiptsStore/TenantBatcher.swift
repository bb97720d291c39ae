import NIOCore
import Postgres
import ServiceLifecycle
import Synchronization
import Tracing

/// Gathers a tenant's concurrent requests of one kind into batches, each one call of a SQL
/// function that does them all in one statement and one commit (`receipts.mark_read_each`,
/// `receipts.send_each`, `receipts.delete_message_each`).
///
/// A request that finds fewer than `concurrentRuns` runs of its tenant under way starts
/// one at once, so an idle service adds no wait. A run takes batches off the tenant's queue
/// (`BatchQueue`) until none is left: requests that arrive while it works go together into
/// its next batch, up to `maximumBatch`, and never two with the same `key` at a time (so
/// requests on one key follow each other, as separate calls would). Each request gets the
/// outcome its batch gave it.
///
/// A run can stall: its statement may wait on a row lock, held by a read-all of the same
/// chat or by an open transaction in psql. So while requests wait, a watch looks every
/// `stallAfter`: when no run of the tenant has taken a batch for that long, it starts one
/// more beside them, up to `maximumConcurrentRuns`, for the waiting requests whose keys are
/// free. A run keeps two batches in the database (`ReceiptsStore.runBatches`), so a stalled
/// statement also holds the batch sent behind it: the requests of up to two batches wait for
/// the lock, and the watch serves those that come after them.
///
/// Runs and watches are tasks of the batcher's own, never of a request: a run serves the
/// requests that come while it works, and the request that started it is answered when its
/// own batch is. The same whether or not the batcher runs as a `Service` (a store used by a
/// one-off command or a test that does not run its services batches alike). As a service,
/// `run()` is how shutdown reaches them: on graceful shutdown it waits for the runs under way,
/// which answer every request they hold; cancelled, it cancels them (their requests fail
/// with the cancellation).
///
/// A request whose task is cancelled is answered at once with `CancellationError`. When its
/// batch was already taken, the batch goes on without it: what it asked may still be
/// committed (a send, a read; both are idempotent, so a client may retry), its key stays
/// taken until the batch is answered (so a retry follows it), and the batch's answer for it is
/// dropped.
///
/// A request keeps the database deadline of the task that submits it (`PostgresDeadline`,
/// one per HTTP request), though a run of another task does it:
/// - not yet taken by its deadline, it is withdrawn and answered `deadlineExceeded` (503):
///   nothing of it was done;
/// - a batch is never sent with a request whose deadline has passed, and its statement is
///   ended by the server at its members' earliest deadline (`PostgresPipeline.send(_:_:by:)`),
///   so a batch answers by then, done or not done;
/// - a batch the server started late, behind another one that was slow, may end after that
///   deadline: its requests are answered `deadlineExceeded` `answerGrace` after theirs, and
///   the batch may still commit them (as with a cancelled request).
/// One task watches all the deadlines while requests with one are under way.
///
/// Every decision (which requests wait, what a batch takes, when a run starts or ends, which
/// request is answered with what, and when) is `BatchingStateMachine`'s; this class holds it
/// under a lock and carries out what it returns.
final class TenantBatcher<Request: Sendable, Outcome: Sendable>: Service, Sendable {
    /// Does a tenant's batches, taking them off `queue` until it ends the run.
    typealias Run = @Sendable (_ tenant: String, _ queue: BatchQueue<Request, Outcome>) async throws -> Void
    typealias Machine = BatchingStateMachine<Request, CheckedContinuation<Answered<Outcome>, any Error>>

    fileprivate struct State {
        var machine: Machine
        /// The batcher's tasks under way (runs and watches), to cancel when `run()` is.
        var tasks: [Int: Task<Void, Never>] = [:]
        var nextTaskID = 0
        /// Set once `run()` is cancelled: tasks started later begin cancelled.
        var isCancelled = false
        /// `run()`, after graceful shutdown, waiting for the runs under way to end.
        var shutdown: CheckedContinuation<Void, Never>?
    }

    let maximumBatch: Int
    /// Runs of one tenant at a time. One: while its batch is in the database, the next one
    /// gathers, and fewer, larger batches share more of the per-call work (a transaction,
    /// the triggers, the commit, the event hub's read); on the 2-core bench machine one run
    /// made about a third more sends a second than two. Other tenants' runs go beside it.
    let concurrentRuns: Int
    /// Runs of one tenant at a time when some stall.
    let maximumConcurrentRuns: Int
    /// How long runs may go without taking a batch before one more starts: several times
    /// what a batch took in the bench (about 4 ms for 16 reads), short beside a client's
    /// timeout.
    let stallAfter: Duration
    /// How long past its deadline a request taken in a batch waits for the batch's answer
    /// before it is answered `deadlineExceeded`: as long as a call given up at its deadline
    /// may still hold its connection (`PostgresConnection.abandonAfter`).
    static var answerGrace: TimeAmount { .seconds(1) }

    private let key: @Sendable (Request) -> [String]
    fileprivate let state: Mutex<State>
    private let nextRequestID = Atomic<Int>(0)

    /// - Parameter key: requests with equal keys never share a batch or run at once.
    init(
        maximumBatch: Int = 100,
        concurrentRuns: Int = 1,
        maximumConcurrentRuns: Int = 4,
        stallAfter: Duration = .milliseconds(50),
        key: @escaping @Sendable (Request) -> [String]
    ) {
        self.maximumBatch = maximumBatch
        self.concurrentRuns = concurrentRuns
        self.maximumConcurrentRuns = max(concurrentRuns, maximumConcurrentRuns)
        self.stallAfter = stallAfter
        self.key = key
        let configuration = Machine.Configuration(
            maximumBatch: maximumBatch, concurrentRuns: concurrentRuns, maximumConcurrentRuns: self.maximumConcurrentRuns,
            stallAfter: TimeAmount(stallAfter), answerGrace: Self.answerGrace)
        self.state = Mutex(State(machine: Machine(configuration)))
    }

    /// Waits for graceful shutdown, then for the runs under way (which answer every request
    /// they hold); cancelled, it cancels the batcher's tasks and waits for them to end.
    func run() async throws {
        await withTaskCancellationHandler {
            try? await gracefulShutdown()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let idle = self.state.withLock { state in
                    guard state.machine.runsUnderWay > 0 else { return true }
                    state.shutdown = continuation
                    return false
                }
                if idle { continuation.resume() }
            }
        } onCancel: {
            let tasks = self.state.withLock { state in
                state.isCancelled = true
                return Array(state.tasks.values)
            }
            for task in tasks { task.cancel() }
        }
    }

    /// Does `request` in a batch of `tenant`'s; `run` does the batches if this request
    /// starts a run of them.
    func submit(_ request: Request, tenant: String, run: @escaping Run) async throws -> Outcome {
        let id = self.nextRequestID.wrappingAdd(1, ordering: .relaxed).newValue
        let queued = QueuedRequest(
            id: id, request: request, key: [tenant] + self.key(request), deadline: PostgresDeadline.current,
            trace: ReceiptsTracing.isOn ? ServiceContext.current : nil)
        let answered = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Answered<Outcome>, any Error>) in
                // Cancelled before it joined: `cancel` found nothing to answer, so it is answered here.
                let starts = self.state.withLock { state -> Machine.Starts? in
                    if Task.isCancelled { return nil }
                    return state.machine.submit(queued, tenant: tenant, waiter: continuation)
                }
                guard let starts else { return continuation.resume(throwing: CancellationError()) }
                if starts.deadlineWatch { self.start { await self.watchDeadlines() } }
                if let runID = starts.run { self.startRun(runID, of: tenant, run: run) }
                if starts.stallWatch { self.start { await self.watchForStalls(of: tenant, run: run) } }
            }
        } onCancel: {
            self.state.withLock { $0.machine.cancel(id) }?.resume(throwing: CancellationError())
        }
        // The request's consistency token (`CommitPositionSlot`), read behind its batch.
        if let position = answered.committedAt { CommitPositionSlot.current?.record(position) }
        return answered.outcome
    }

    /// Starts `body` as a task of the batcher's; `whenDone` updates the state as it ends,
    /// under the same lock, and returns what to resume then.
    private func start(
        _ body: @escaping @Sendable () async -> Void,
        whenDone: (@Sendable (inout State) -> CheckedContinuation<Void, Never>?)? = nil
    ) {
        self.state.withLock { state in
            state.nextTaskID += 1
            let taskID = state.nextTaskID
            // A run belongs to no request: it inherits none's task-local values (its deadline).
            let task = Task.detached {
                await body()
                let resume = self.state.withLock { state in
                    state.tasks[taskID] = nil
                    return whenDone?(&state)
                }
                resume?.resume()
            }
            state.tasks[taskID] = task
            if state.isCancelled { task.cancel() }
        }
    }

    private func startRun(_ runID: Int, of tenant: String, run: @escaping Run) {
        self.start {
            await self.drain(runID, of: tenant, run: run)
        } whenDone: { state in
            // The last run under way lets a graceful shutdown end.
            guard state.machine.runFinished(runID) else { return nil }
            defer { state.shutdown = nil }
            return state.shutdown
        }
    }

    /// Answers the requests whose deadline has passed, for as long as requests with a
    /// deadline are under way: one task for all of them, which sleeps until the next
    /// deadline to meet (a timer per request would cost every request two wake-ups of a
    /// thread). A deadline is met within the disorder of the queue: requests that began
    /// earlier may join it a little later (their authentication took longer).
    private func watchDeadlines() async {
        while true {
            let now = NIODeadline.now()
            let expired = self.state.withLock { state -> Machine.Expired in
                guard !Task.isCancelled else {
                    state.machine.stopWatchingDeadlines()
                    return Machine.Expired()
                }
                return state.machine.expire(now: now)
            }
            for (waiter, expiry) in expired.failures {
                switch expiry {
                case .waitingForTurn: waiter.resume(throwing: Self.deadlinePassed(waitingFor: "its turn in a batch"))
                case .waitingForAnswer: waiter.resume(throwing: Self.deadlinePassed(waitingFor: "its batch's answer"))
                }
            }
            guard let lookAgainAt = expired.lookAgainAt else { return }
            try? await Task.sleep(for: .nanoseconds(max(0, (lookAgainAt - NIODeadline.now()).nanoseconds)))
        }
    }

    static func deadlinePassed(waitingFor what: String) -> PostgresError {
        PostgresError(code: .deadlineExceeded, message: "the database work's deadline passed while the request waited for \(what)")
    }

    /// Lets `run` do the tenant's batches until the queue ends the run. A run that fails
    /// fails the batches it had taken and not answered; when it had taken none, the next
    /// batch fails with its error, so that a failure that repeats (a pool that cannot lend
    /// a connection) reaches the waiting requests instead of holding them.
    private func drain(_ runID: Int, of tenant: String, run: Run) async {
        let queue = BatchQueue(batcher: self, run: runID)
        while !queue.hasEnded {
            do {
                try await run(tenant, queue)
                queue.failUnanswered(with: RunEndedEarly())
            } catch {
                if !queue.failUnanswered(with: error), let batch = queue.next(endingRunWhenEmpty: true) {
                    queue.fail(batch, with: error)
                }
            }
        }
    }

    /// While requests of the tenant wait, starts one more run whenever the runs under way
    /// have taken no batch for `stallAfter`.
    private func watchForStalls(of tenant: String, run: @escaping Run) async {
        while true {
            try? await Task.sleep(for: self.stallAfter)
            let now = NIODeadline.now()
            let decision = self.state.withLock { state -> Machine.StallDecision in
                guard !Task.isCancelled else {
                    state.machine.stopWatching(tenant)
                    return .stop
                }
                return state.machine.stallCheck(of: tenant, now: now)
            }
            switch decision {
            case .stop: return
            case .keepWatching: continue
            case .startRun(let runID): self.startRun(runID, of: tenant, run: run)
            }
        }
    }
}

/// Requests of one batch, taken off a `BatchQueue`.
struct Batch<Request: Sendable, Outcome: Sendable>: Sendable {
    fileprivate let members: [QueuedRequest<Request>]

    var requests: [Request] { self.members.map(\.request) }
    var count: Int { self.members.count }
    /// The earliest deadline of its requests: when its statement must end.
    var deadline: NIODeadline? { self.members.compactMap(\.deadline).min() }
    /// The traces of its requests, when tracing is on.
    var traces: [ServiceContext] { self.members.compactMap(\.trace) }

    /// The requests whose deadline has passed by `now`, and the others, as batches (nil when
    /// empty).
    func partitioned(expiredBy now: NIODeadline) -> (expired: Batch?, live: Batch?) {
        let expired = self.members.filter { $0.deadline.map { $0 <= now } ?? false }
        guard !expired.isEmpty else { return (nil, self) }
        let live = self.members.filter { $0.deadline.map { $0 > now } ?? true }
        return (Batch(members: expired), live.isEmpty ? nil : Batch(members: live))
    }

    /// The same requests, each a batch of its own.
    var split: [Batch] { self.members.map { Batch(members: [$0]) } }
}

/// One run's view of a tenant's waiting requests: it takes batches and answers them.
///
/// A run may take the next batch before it has answered the last (to keep the database
/// busy); the keys of a batch stay taken until it is answered.
final class BatchQueue<Request: Sendable, Outcome: Sendable>: Sendable {
    private let batcher: TenantBatcher<Request, Outcome>
    private let run: Int

    fileprivate init(batcher: TenantBatcher<Request, Outcome>, run: Int) {
        self.batcher = batcher
        self.run = run
    }

    /// Whether the run has ended: the queue had nothing for it.
    var hasEnded: Bool { self.batcher.state.withLock { $0.machine.hasEnded(self.run) } }

    /// Takes the next batch: the waiting requests whose keys are free, in arrival order.
    /// Nil when there is none; with `endingRunWhenEmpty`, that also ends the run (a run
    /// that still has batches to answer passes false, and asks again after answering).
    func next(endingRunWhenEmpty: Bool) -> Batch<Request, Outcome>? {
        let now = NIODeadline.now()
        let next = self.batcher.state.withLock { $0.machine.nextBatch(for: self.run, endingRunWhenEmpty: endingRunWhenEmpty, now: now) }
        guard case .batch(let members) = next else { return nil }
        return Batch(members: members)
    }

    /// Answers each request of `batch` with its outcome, in order, and frees their keys;
    /// `committedAt` is the primary's log position read right after the batch committed.
    func answer(_ batch: Batch<Request, Outcome>, with outcomes: [Outcome], committedAt: WALPosition? = nil) {
        guard outcomes.count == batch.count else {
            self.fail(batch, with: CountMismatch(requests: batch.count, outcomes: outcomes.count))
            return
        }
        let waiters = self.batcher.state.withLock { $0.machine.answer(batch.members.map(\.id), of: self.run) }
        for (waiter, outcome) in zip(waiters, outcomes) {
            waiter?.resume(returning: Answered(outcome: outcome, committedAt: committedAt))
        }
    }

    /// Answers each request of `batch` with `error`, and frees their keys.
    func fail(_ batch: Batch<Request, Outcome>, with error: any Error) {
        let waiters = self.batcher.state.withLock { $0.machine.answer(batch.members.map(\.id), of: self.run) }
        for waiter in waiters { waiter?.resume(throwing: error) }
    }

    /// Fails every request taken and not answered; returns whether there was one.
    @discardableResult
    func failUnanswered(with error: any Error) -> Bool {
        let waiters = self.batcher.state.withLock { $0.machine.abandonUnanswered(of: self.run) }
        for waiter in waiters { waiter?.resume(throwing: error) }
        return !waiters.isEmpty
    }
}

/// A batch call answered another number of outcomes than it had requests (a bug).
struct CountMismatch: Error, CustomStringConvertible {
    let requests: Int
    let outcomes: Int
    var description: String { "a batch call answered \(self.outcomes) outcomes for \(self.requests) requests" }
}

/// A run returned with batches it had taken and not answered (a bug).
struct RunEndedEarly: Error, CustomStringConvertible {
    var description: String { "a batch run ended without answering every request it had taken" }
}

/// A batched request's outcome, and where the log stood once its batch had committed.
struct Answered<Outcome: Sendable>: Sendable {
    var outcome: Outcome
    var committedAt: WALPosition?
}
