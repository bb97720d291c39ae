import DequeModule
import NIOCore
import NIOPosix
import Postgres
import ServiceLifecycle
import Synchronization

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
/// Runs and watches are child tasks of the batcher's `run()`, a `Service` the application
/// runs beside the pool: on graceful shutdown it takes no more and waits for the runs under
/// way, which answer every request they hold; cancelled, it cancels them (their requests fail
/// with the cancellation). A batcher that is not running (a store used by a one-off command
/// or a test that does not run its services) does each run in the task of the request that
/// starts it, and watches for no stalls.
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
/// Deadlines are kept while the batcher runs as a service (one task watches them all); a
/// batcher that is not running keeps none.
final class TenantBatcher<Request: Sendable, Outcome: Sendable>: Service, Sendable {
    /// Does a tenant's batches, taking them off `queue` until it ends the run.
    typealias Run = @Sendable (_ tenant: String, _ queue: BatchQueue<Request, Outcome>) async throws -> Void

    fileprivate struct Waiting: Sendable {
        let id: Int
        let request: Request
        let key: [String]
        /// When the request's database work must be done; nil: no deadline of its own.
        let deadline: NIODeadline?
        let reply: Reply<Outcome>
    }

    fileprivate struct State {
        var waiting: [String: [Waiting]] = [:]
        /// Runs under way, per tenant.
        var running: [String: Int] = [:]
        /// When a run of the tenant last took a batch.
        var lastBatchStart: [String: ContinuousClock.Instant] = [:]
        /// The tenants with a stall watch under way.
        var watched: Set<String> = []
        /// The tenant and key of every request taken by a run and not yet answered.
        var busy: Set<[String]> = []
        var nextID = 0
        /// Whether `run()` takes jobs: set while it runs, until graceful shutdown.
        var isServing = false
        /// The requests that have a deadline, in the order they came (which is nearly the
        /// order of their deadlines: every request gets the same database timeout), for
        /// `expireRequests()`. Answered ones leave it from the front as they are met.
        var deadlines: Deque<Deadline> = []
        /// Whether `expireRequests()` runs.
        var isExpiring = false
    }

    fileprivate struct Deadline {
        let deadline: NIODeadline
        let id: Int
        let tenant: String
        let reply: Reply<Outcome>
    }

    /// What a request does after joining the queue.
    private enum Next {
        case startRun, startWatch, wait
    }

    /// A run or a watch, for `run()` to do as a child task.
    private typealias Job = @Sendable () async -> Void

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
    fileprivate let state = Mutex(State())
    private let jobs = AsyncStream<Job>.makeStream()

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
    }

    /// Does the runs and watches that requests start, until graceful shutdown (then it waits
    /// for those under way) or cancellation (then it cancels them).
    func run() async throws {
        self.state.withLock { $0.isServing = true }
        await withDiscardingTaskGroup { group in
            await withGracefulShutdownHandler {
                for await job in self.jobs.stream {
                    group.addTask { await job() }
                }
            } onGracefulShutdown: {
                self.stopServing()
            }
            self.stopServing()
        }
    }

    private func stopServing() {
        self.state.withLock { $0.isServing = false }
        self.jobs.continuation.finish()
    }

    /// Hands `job` to `run()`; false when the batcher is not serving.
    private func start(_ job: @escaping Job) -> Bool {
        guard self.state.withLock({ $0.isServing }) else { return false }
        if case .enqueued = self.jobs.continuation.yield(job) { return true }
        return false
    }

    /// Does `request` in a batch of `tenant`'s; `run` does the batches if this request
    /// starts a run of them.
    func submit(_ request: Request, tenant: String, run: @escaping Run) async throws -> Outcome {
        let key = [tenant] + self.key(request)
        let deadline = PostgresDeadline.current
        let reply = Reply<Outcome>()
        let (id, next, startsExpiring) = self.state.withLock { state -> (Int, Next, Bool) in
            state.nextID += 1
            state.waiting[tenant, default: []].append(
                Waiting(id: state.nextID, request: request, key: key, deadline: deadline, reply: reply))
            var startsExpiring = false
            // Not serving (a one-off command, a test of the store alone): no deadlines kept.
            if let deadline, state.isServing {
                while let first = state.deadlines.first, first.reply.isAnswered { state.deadlines.removeFirst() }
                state.deadlines.append(Deadline(deadline: deadline, id: state.nextID, tenant: tenant, reply: reply))
                startsExpiring = !state.isExpiring
                if startsExpiring { state.isExpiring = true }
            }
            if state.running[tenant, default: 0] < self.concurrentRuns {
                state.running[tenant, default: 0] += 1
                return (state.nextID, .startRun, startsExpiring)
            }
            return (state.nextID, state.watched.insert(tenant).inserted ? .startWatch : .wait, startsExpiring)
        }
        // Ended by graceful shutdown rather than waited for: the runs under way answer then.
        if startsExpiring, !self.start({ await cancelWhenGracefulShutdown { await self.expireRequests() } }) {
            self.state.withLock { $0.isExpiring = false }
        }
        switch next {
        case .startRun:
            if !self.start({ await self.drain(tenant, run: run) }) {
                await self.drain(tenant, run: run)
            }
        case .startWatch:
            if !self.start({ await self.watchForStalls(of: tenant, run: run) }) {
                _ = self.state.withLock { $0.watched.remove(tenant) }
            }
        case .wait:
            break
        }
        return try await withTaskCancellationHandler {
            try await reply.value
        } onCancel: {
            self.withdraw(id, of: tenant)
            reply.resume(with: .failure(CancellationError()))
        }
    }

    /// Answers the requests whose deadline has passed (`expire`), for as long as requests
    /// with a deadline are under way: one task for all of them, which sleeps until the
    /// oldest one's deadline (a timer per request would cost every request two wake-ups of
    /// a thread). A deadline is met within the disorder of the queue: requests that began
    /// earlier may join it a little later (their authentication took longer).
    private func expireRequests() async {
        while !Task.isCancelled {
            let now = NIODeadline.now()
            let (expired, sleepUntil) = self.state.withLock { state -> ([Deadline], NIODeadline?) in
                var expired: [Deadline] = []
                while let first = state.deadlines.first, first.reply.isAnswered || first.deadline <= now {
                    state.deadlines.removeFirst()
                    if !first.reply.isAnswered { expired.append(first) }
                }
                guard let first = state.deadlines.first else {
                    state.isExpiring = false
                    return (expired, nil)
                }
                return (expired, first.deadline)
            }
            for request in expired { self.expire(request.id, of: request.tenant, reply: request.reply) }
            guard let sleepUntil else { return }
            try? await Task.sleep(for: .nanoseconds(max(0, (sleepUntil - NIODeadline.now()).nanoseconds)))
        }
        // Shutting down: the runs under way answer what waits.
        self.state.withLock { $0.isExpiring = false }
    }

    /// Answers a request whose deadline has passed: at once if no run has taken it (then
    /// nothing of it is done), else `answerGrace` later unless its batch answers first.
    private func expire(_ id: Int, of tenant: String, reply: Reply<Outcome>) {
        if self.withdraw(id, of: tenant) {
            reply.resume(with: .failure(Self.deadlinePassed(waitingFor: "its turn in a batch")))
        } else {
            MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: Self.answerGrace) {
                reply.resume(with: .failure(Self.deadlinePassed(waitingFor: "its batch's answer")))
            }
        }
    }

    static func deadlinePassed(waitingFor what: String) -> PostgresError {
        PostgresError(code: .deadlineExceeded, message: "the database work's deadline passed while the request waited for \(what)")
    }

    /// Takes a request off the queue, if no run has taken it yet; returns whether it did.
    @discardableResult
    private func withdraw(_ id: Int, of tenant: String) -> Bool {
        self.state.withLock { state in
            guard var waiting = state.waiting[tenant], let index = waiting.firstIndex(where: { $0.id == id }) else { return false }
            waiting.remove(at: index)
            state.waiting[tenant] = waiting.isEmpty ? nil : waiting
            return true
        }
    }

    /// Lets `run` do the tenant's batches until the queue ends the run. A run that fails
    /// fails the batches it had taken and not answered; when it had taken none, the next
    /// batch fails with its error, so that a failure that repeats (a pool that cannot lend
    /// a connection) reaches the waiting requests instead of holding them.
    private func drain(_ tenant: String, run: Run) async {
        let queue = BatchQueue(batcher: self, tenant: tenant)
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
            let startsRun = self.state.withLock { state -> Bool? in
                guard state.waiting[tenant] != nil, !Task.isCancelled else {
                    state.watched.remove(tenant)
                    return nil
                }
                let running = state.running[tenant, default: 0]
                let stalled = state.lastBatchStart[tenant].map { ContinuousClock.now - $0 >= self.stallAfter } ?? true
                guard running < self.maximumConcurrentRuns, stalled else { return false }
                state.running[tenant] = running + 1
                return true
            }
            switch startsRun {
            case nil: return
            case true?:
                if !self.start({ await self.drain(tenant, run: run) }) {
                    // Shutting down: the runs under way answer what waits.
                    self.state.withLock { state in
                        state.running[tenant, default: 1] -= 1
                        if state.running[tenant] == 0 { state.running[tenant] = nil }
                        state.watched.remove(tenant)
                    }
                    return
                }
            case false?: continue
            }
        }
    }
}

/// The answer to one request: set once, by its batch or by its cancellation, whichever comes
/// first; awaited once, by the request.
final class Reply<Outcome: Sendable>: Sendable {
    private enum State {
        case pending(CheckedContinuation<Outcome, any Error>?)
        case done(Result<Outcome, any Error>)
    }
    private let state = Mutex(State.pending(nil))

    /// Whether the answer is set.
    var isAnswered: Bool {
        self.state.withLock { state in
            if case .done = state { return true }
            return false
        }
    }

    /// Sets the answer, unless one was set already.
    func resume(with result: Result<Outcome, any Error>) {
        let waiter = self.state.withLock { state -> CheckedContinuation<Outcome, any Error>?? in
            guard case .pending(let waiter) = state else { return nil }
            state = .done(result)
            return .some(waiter)
        }
        if case .some(.some(let waiter)) = waiter { waiter.resume(with: result) }
    }

    /// The answer, once set.
    var value: Outcome {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let result = self.state.withLock { state -> Result<Outcome, any Error>? in
                    switch state {
                    case .done(let result): return result
                    case .pending: state = .pending(continuation); return nil
                    }
                }
                if let result { continuation.resume(with: result) }
            }
        }
    }
}

/// Requests of one batch, taken off a `BatchQueue`.
struct Batch<Request: Sendable, Outcome: Sendable>: Sendable {
    fileprivate let members: [TenantBatcher<Request, Outcome>.Waiting]

    var requests: [Request] { self.members.map(\.request) }
    var count: Int { self.members.count }
    /// The earliest deadline of its requests: when its statement must end.
    var deadline: NIODeadline? { self.members.compactMap(\.deadline).min() }

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
    private let tenant: String
    private struct RunState {
        /// Taken and not yet answered, by id.
        var unanswered: [Int: TenantBatcher<Request, Outcome>.Waiting] = [:]
        var hasEnded = false
    }
    private let runState = Mutex(RunState())

    fileprivate init(batcher: TenantBatcher<Request, Outcome>, tenant: String) {
        self.batcher = batcher
        self.tenant = tenant
    }

    /// Whether the run has ended: the queue had nothing for it.
    var hasEnded: Bool { self.runState.withLock { $0.hasEnded } }

    /// Takes the next batch: the waiting requests whose keys are free, in arrival order.
    /// Nil when there is none; with `endingRunWhenEmpty`, that also ends the run (a run
    /// that still has batches to answer passes false, and asks again after answering).
    func next(endingRunWhenEmpty: Bool) -> Batch<Request, Outcome>? {
        let maximumBatch = self.batcher.maximumBatch
        let tenant = self.tenant
        let batch = self.batcher.state.withLock { state -> [TenantBatcher<Request, Outcome>.Waiting]? in
            var batch: [TenantBatcher<Request, Outcome>.Waiting] = []
            var later: [TenantBatcher<Request, Outcome>.Waiting] = []
            for waiting in state.waiting[tenant] ?? [] {
                if batch.count < maximumBatch, state.busy.insert(waiting.key).inserted {
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
            guard endingRunWhenEmpty else { return nil }
            state.running[tenant, default: 1] -= 1
            if state.running[tenant] == 0 {
                state.running[tenant] = nil
                state.lastBatchStart[tenant] = nil
            }
            return nil
        }
        self.runState.withLock { run in
            if let batch {
                for waiting in batch { run.unanswered[waiting.id] = waiting }
            } else if endingRunWhenEmpty {
                run.hasEnded = true
            }
        }
        return batch.map(Batch.init(members:))
    }

    /// Answers each request of `batch` with its outcome, in order, and frees their keys.
    func answer(_ batch: Batch<Request, Outcome>, with outcomes: [Outcome]) {
        guard outcomes.count == batch.count else {
            self.fail(batch, with: CountMismatch(requests: batch.count, outcomes: outcomes.count))
            return
        }
        self.release(batch.members)
        for (waiting, outcome) in zip(batch.members, outcomes) { waiting.reply.resume(with: .success(outcome)) }
    }

    /// Answers each request of `batch` with `error`, and frees their keys.
    func fail(_ batch: Batch<Request, Outcome>, with error: any Error) {
        self.release(batch.members)
        for waiting in batch.members { waiting.reply.resume(with: .failure(error)) }
    }

    /// Fails every request taken and not answered; returns whether there was one.
    @discardableResult
    func failUnanswered(with error: any Error) -> Bool {
        let unanswered = self.runState.withLock { run in
            defer { run.unanswered = [:] }
            return Array(run.unanswered.values)
        }
        guard !unanswered.isEmpty else { return false }
        self.fail(Batch(members: unanswered), with: error)
        return true
    }

    private func release(_ members: [TenantBatcher<Request, Outcome>.Waiting]) {
        self.runState.withLock { run in
            for waiting in members { run.unanswered[waiting.id] = nil }
        }
        self.batcher.state.withLock { state in
            for waiting in members { state.busy.remove(waiting.key) }
        }
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
