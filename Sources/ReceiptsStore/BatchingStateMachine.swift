import DequeModule
import NIOCore
import Tracing

/// A request in a tenant's queue or in a batch taken off it.
struct QueuedRequest<Request> {
    let id: Int
    let request: Request
    /// The tenant and the request's key: two requests with equal keys never share a batch or
    /// run at once.
    let key: [String]
    /// When its database work must be done; nil: no deadline of its own.
    let deadline: NIODeadline?
    /// The request's trace, when tracing is on (`ReceiptsTracing`): its batch's span
    /// continues it.
    var trace: ServiceContext? = nil
}

extension QueuedRequest: Sendable where Request: Sendable {}

/// The decisions of a `TenantBatcher`, which it carries out: which requests wait, when a run
/// starts and ends, what goes in a run's next batch, when a stalled tenant gets one run more,
/// which requests are answered with what, and when.
///
/// A value with no locks, no clocks and no I/O: every event takes the time it happened
/// (`now`) and returns what the batcher must do. `Waiter` is what the batcher resumes to
/// answer a request (a continuation; the tests use plain values), which the machine hands
/// back exactly once, from whichever event answers the request first.
///
/// A request is *waiting* (in its tenant's queue) until a run takes it into a batch, then
/// *taken* until the run answers the batch. Its key is busy from when it is taken until its
/// batch is answered, even when the request itself was answered earlier (cancelled, or past
/// its deadline): a retry of it then follows the batch that may still commit it.
struct BatchingStateMachine<Request, Waiter> {
    struct Configuration {
        /// The most requests in one batch.
        var maximumBatch: Int
        /// Runs of one tenant that requests start at once.
        var concurrentRuns: Int
        /// Runs of one tenant at a time when some stall.
        var maximumConcurrentRuns: Int
        /// How long a tenant's runs may go without taking a batch while requests wait before
        /// one more starts.
        var stallAfter: TimeAmount
        /// How long past its deadline a taken request waits for its batch's answer.
        var answerGrace: TimeAmount
    }

    /// What a submitted request sets going.
    struct Starts: Equatable {
        /// A run of the request's tenant, with its id.
        var run: Int?
        /// A watch of the tenant for stalls (`stallCheck(of:now:)` every `stallAfter`).
        var stallWatch = false
        /// The watch of deadlines (`expire(now:)` until it returns no time to wake at).
        var deadlineWatch = false
    }

    /// What a run's request for its next batch gets.
    enum NextBatch {
        /// The batch to do.
        case batch([QueuedRequest<Request>])
        /// Nothing now; ask again after answering what the run has taken.
        case nothingYet
        /// Nothing: the run has ended.
        case ended
    }

    /// What a stall watch does after a look.
    enum StallDecision: Equatable {
        /// Start one run more, with this id, then look again after `stallAfter`.
        case startRun(Int)
        /// Look again after `stallAfter`.
        case keepWatching
        /// Nothing of the tenant waits: the watch ends.
        case stop
    }

    /// Why a request is answered with a failure before its batch answers it.
    enum Expiry: Equatable {
        /// Its deadline passed while it waited for a batch: nothing of it was done.
        case waitingForTurn
        /// Its deadline and `answerGrace` passed while its batch was in the database: the batch
        /// may still commit it.
        case waitingForAnswer
    }

    /// What a look at the deadlines found.
    struct Expired {
        /// Requests to fail, each with why.
        var failures: [(waiter: Waiter, expiry: Expiry)] = []
        /// When to look again; nil: no deadline is left and the watch ends.
        var lookAgainAt: NIODeadline?
    }

    private struct Entry {
        let tenant: String
        let key: [String]
        /// Nil once the request has been answered (cancelled, or expired) while taken.
        var waiter: Waiter?
        /// The run that took it; nil while it waits.
        var takenBy: Int?
    }

    private struct TenantState {
        /// Waiting requests, in arrival order.
        var waiting: [QueuedRequest<Request>] = []
        var running = 0
        /// When a run of the tenant last took a batch; nil when no run is under way.
        var lastBatchStart: NIODeadline?
        var isWatched = false

        var isIdle: Bool { self.waiting.isEmpty && self.running == 0 && !self.isWatched }
    }

    private struct RunState {
        let tenant: String
        /// Taken and not yet answered.
        var unanswered: Set<Int> = []
        var hasEnded = false
    }

    let configuration: Configuration
    /// Every request not yet answered by its batch, waiting or taken.
    private var entries: [Int: Entry] = [:]
    private var tenants: [String: TenantState] = [:]
    private var runs: [Int: RunState] = [:]
    private var nextRunID = 0
    /// The keys of every taken request whose batch has not answered.
    private var busy: Set<[String]> = []
    /// Requests with a deadline, in the order they came (nearly the order of their deadlines:
    /// every request gets the same database timeout). Answered ones are dropped as they are met.
    private var deadlines: Deque<(deadline: NIODeadline, id: Int)> = []
    /// Taken requests past their deadline, with when they are answered if their batch has not.
    private var lateAnswers: Deque<(at: NIODeadline, id: Int)> = []
    private var isWatchingDeadlines = false

    init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    /// How many runs are under way, of every tenant.
    var runsUnderWay: Int { self.runs.count }

    /// Whether a request is waiting or taken and unanswered.
    func isPending(_ id: Int) -> Bool { self.entries[id]?.waiter != nil }

    // MARK: - Requests

    /// A request joins its tenant's queue. It starts a run when its tenant has fewer than
    /// `concurrentRuns`, else a stall watch if none looks at the tenant, and the deadline
    /// watch if it has a deadline and none is under way.
    mutating func submit(_ request: QueuedRequest<Request>, tenant: String, waiter: Waiter) -> Starts {
        var starts = Starts()
        self.entries[request.id] = Entry(tenant: tenant, key: request.key, waiter: waiter)
        if let deadline = request.deadline {
            self.dropAnsweredDeadlines()
            self.deadlines.append((deadline, request.id))
            if !self.isWatchingDeadlines {
                self.isWatchingDeadlines = true
                starts.deadlineWatch = true
            }
        }
        self.tenants[tenant, default: TenantState()].waiting.append(request)
        if self.tenants[tenant]!.running < self.configuration.concurrentRuns {
            starts.run = self.startRun(of: tenant)
        } else if !self.tenants[tenant]!.isWatched {
            self.tenants[tenant]!.isWatched = true
            starts.stallWatch = true
        }
        return starts
    }

    /// The request's task was cancelled: it is answered at once. Waiting, it is withdrawn
    /// (nothing of it is done); taken, its batch goes on without it and its key stays busy
    /// until the batch answers. Returns whom to answer, nil when it was answered already.
    mutating func cancel(_ id: Int) -> Waiter? {
        self.answerEarly(id)
    }

    private mutating func answerEarly(_ id: Int) -> Waiter? {
        guard let entry = self.entries[id], let waiter = entry.waiter else { return nil }
        if entry.takenBy == nil {
            self.entries[id] = nil
            self.tenants[entry.tenant]?.waiting.removeAll { $0.id == id }
            self.forgetIfIdle(entry.tenant)
        } else {
            self.entries[id]!.waiter = nil
        }
        return waiter
    }

    // MARK: - Runs

    private mutating func startRun(of tenant: String) -> Int {
        self.nextRunID += 1
        self.runs[self.nextRunID] = RunState(tenant: tenant)
        self.tenants[tenant, default: TenantState()].running += 1
        return self.nextRunID
    }

    /// The run's next batch: the tenant's waiting requests whose keys are free, in arrival
    /// order, up to `maximumBatch`; their keys become busy. When there is none, with
    /// `endingRunWhenEmpty` the run ends (a run with batches still to answer passes false,
    /// and asks again after answering them).
    mutating func nextBatch(for run: Int, endingRunWhenEmpty: Bool, now: NIODeadline) -> NextBatch {
        guard let tenant = self.runs[run].flatMap({ $0.hasEnded ? nil : $0.tenant }) else { return .ended }
        var batch: [QueuedRequest<Request>] = []
        var later: [QueuedRequest<Request>] = []
        for request in self.tenants[tenant]?.waiting ?? [] {
            if batch.count < self.configuration.maximumBatch, self.busy.insert(request.key).inserted {
                batch.append(request)
                self.entries[request.id]?.takenBy = run
                self.runs[run]!.unanswered.insert(request.id)
            } else {
                later.append(request)
            }
        }
        self.tenants[tenant]?.waiting = later
        guard batch.isEmpty else {
            self.tenants[tenant]?.lastBatchStart = now
            return .batch(batch)
        }
        guard endingRunWhenEmpty else { return .nothingYet }
        self.runs[run]!.hasEnded = true
        self.tenants[tenant]!.running -= 1
        if self.tenants[tenant]!.running == 0 { self.tenants[tenant]!.lastBatchStart = nil }
        self.forgetIfIdle(tenant)
        return .ended
    }

    /// Whether the run has ended (its tenant had nothing left for it).
    func hasEnded(_ run: Int) -> Bool { self.runs[run]?.hasEnded ?? true }

    /// The run's batch of `ids` is answered: frees their keys; returns whom to answer, in
    /// order, nil for a request answered already (its answer is dropped).
    mutating func answer(_ ids: [Int], of run: Int) -> [Waiter?] {
        ids.map { id in
            self.runs[run]?.unanswered.remove(id)
            guard let entry = self.entries.removeValue(forKey: id) else { return nil }
            self.busy.remove(entry.key)
            return entry.waiter
        }
    }

    /// The run ends its part in every request it took and has not answered (it failed, or
    /// returned without answering them): frees their keys; returns whom to fail, one per
    /// such request, nil for one answered already (empty: the run had none).
    mutating func abandonUnanswered(of run: Int) -> [Waiter?] {
        guard let unanswered = self.runs[run]?.unanswered, !unanswered.isEmpty else { return [] }
        return self.answer(unanswered.sorted(), of: run)
    }

    /// The run's task is over, after it ended and answered what it took: the machine forgets
    /// it. Returns whether no run is under way.
    mutating func runFinished(_ run: Int) -> Bool {
        let state = self.runs.removeValue(forKey: run)
        assert(state.map { $0.hasEnded && $0.unanswered.isEmpty } ?? true, "a run finished before it ended")
        return self.runs.isEmpty
    }

    // MARK: - Stalls

    /// A stall watch looks at its tenant: when requests wait and no run has taken a batch for
    /// `stallAfter` (or none is under way), one more run starts, up to
    /// `maximumConcurrentRuns`. The watch ends when nothing waits.
    mutating func stallCheck(of tenant: String, now: NIODeadline) -> StallDecision {
        guard let state = self.tenants[tenant], !state.waiting.isEmpty else {
            self.stopWatching(tenant)
            return .stop
        }
        let stalled = state.lastBatchStart.map { $0 + self.configuration.stallAfter <= now } ?? true
        guard stalled, state.running < self.configuration.maximumConcurrentRuns else { return .keepWatching }
        return .startRun(self.startRun(of: tenant))
    }

    /// A stall watch ended early (its task was cancelled).
    mutating func stopWatching(_ tenant: String) {
        self.tenants[tenant]?.isWatched = false
        self.forgetIfIdle(tenant)
    }

    // MARK: - Deadlines

    /// The deadline watch looks at the deadlines passed by `now`: a waiting request is
    /// withdrawn and failed at once (`waitingForTurn`); a taken one is failed `answerGrace`
    /// later unless its batch answers first (`waitingForAnswer`).
    mutating func expire(now: NIODeadline) -> Expired {
        var expired = Expired()
        while let first = self.deadlines.first, first.deadline <= now || !self.isPending(first.id) {
            self.deadlines.removeFirst()
            guard let entry = self.entries[first.id], entry.waiter != nil else { continue }
            if entry.takenBy == nil {
                expired.failures.append((self.answerEarly(first.id)!, .waitingForTurn))
            } else {
                self.lateAnswers.append((first.deadline + self.configuration.answerGrace, first.id))
            }
        }
        while let first = self.lateAnswers.first, first.at <= now || !self.isPending(first.id) {
            self.lateAnswers.removeFirst()
            if let waiter = self.answerEarly(first.id) { expired.failures.append((waiter, .waitingForAnswer)) }
        }
        switch (self.deadlines.first?.deadline, self.lateAnswers.first?.at) {
        case (let deadline?, let late?): expired.lookAgainAt = min(deadline, late)
        case (let deadline?, nil): expired.lookAgainAt = deadline
        case (nil, let late?): expired.lookAgainAt = late
        case (nil, nil): self.isWatchingDeadlines = false
        }
        return expired
    }

    /// The deadline watch ended early (its task was cancelled); a later request with a
    /// deadline starts another.
    mutating func stopWatchingDeadlines() {
        self.isWatchingDeadlines = false
    }

    private mutating func dropAnsweredDeadlines() {
        while let first = self.deadlines.first, !self.isPending(first.id) { self.deadlines.removeFirst() }
    }

    private mutating func forgetIfIdle(_ tenant: String) {
        if self.tenants[tenant]?.isIdle == true { self.tenants[tenant] = nil }
    }
}
