import NIOCore
@testable import ReceiptsStore
import Testing

/// The batcher's rules, on a machine driven by hand: requests go by name, the waiter the
/// machine hands back to answer one is its name, and time is what each test says it is.
@Suite("Batching state machine")
struct BatchingStateMachineTests {
    typealias Machine = BatchingStateMachine<String, String>

    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// A machine and the names of its requests, so that a test reads as its rule.
    final class Batcher {
        var machine: Machine
        private var ids: [String: Int] = [:]

        init(maximumBatch: Int = 100, concurrentRuns: Int = 1, maximumConcurrentRuns: Int = 4) {
            self.machine = Machine(
                .init(
                    maximumBatch: maximumBatch, concurrentRuns: concurrentRuns, maximumConcurrentRuns: maximumConcurrentRuns,
                    stallAfter: .milliseconds(50), answerGrace: .seconds(1)))
        }

        /// Submits request `name` of `tenant`, keyed by `key` (its name when not said).
        @discardableResult
        func submit(_ name: String, key: String? = nil, tenant: String = "t", deadline: NIODeadline? = nil) -> Machine.Starts {
            let id = self.ids.count + 1
            self.ids[name] = id
            return self.machine.submit(QueuedRequest(id: id, request: name, key: [tenant, key ?? name], deadline: deadline), tenant: tenant, waiter: name)
        }

        /// The run that `name` started (it must have).
        func startRun(with name: String, tenant: String = "t") -> Int {
            self.submit(name, tenant: tenant).run ?? -1
        }

        func id(_ name: String) -> Int { self.ids[name]! }

        /// The names in the run's next batch; nil when it got none (see `hasEnded`).
        func take(_ run: Int, endingRunWhenEmpty: Bool = true, at now: NIODeadline = BatchingStateMachineTests.start) -> [String]? {
            guard case .batch(let batch) = self.machine.nextBatch(for: run, endingRunWhenEmpty: endingRunWhenEmpty, now: now) else { return nil }
            return batch.map(\.request)
        }

        func hasEnded(_ run: Int) -> Bool { self.machine.hasEnded(run) }

        /// Answers the batch of `names`: whom the run's answers reach (nil: answered already).
        func answer(_ names: [String], of run: Int) -> [String?] {
            self.machine.answer(names.map(self.id), of: run)
        }

        func abandonUnanswered(of run: Int) -> [String?] { self.machine.abandonUnanswered(of: run) }
        func runFinished(_ run: Int) -> Bool { self.machine.runFinished(run) }
        func cancel(_ name: String) -> String? { self.machine.cancel(self.id(name)) }
        func isPending(_ name: String) -> Bool { self.machine.isPending(self.id(name)) }
        func stallCheck(tenant: String = "t", at now: NIODeadline) -> Machine.StallDecision { self.machine.stallCheck(of: tenant, now: now) }
        func stopWatching(tenant: String = "t") { self.machine.stopWatching(tenant) }
        func stopWatchingDeadlines() { self.machine.stopWatchingDeadlines() }
        var runsUnderWay: Int { self.machine.runsUnderWay }

        /// The deadline watch's look at `now`: whom it fails, with why, and when it looks again.
        func expire(at now: NIODeadline) -> (failed: [String], why: [Machine.Expiry], lookAgainAt: NIODeadline?) {
            let expired = self.machine.expire(now: now)
            return (expired.failures.map { $0.waiter }, expired.failures.map { $0.expiry }, expired.lookAgainAt)
        }
    }

    static func startsRun(_ decision: Machine.StallDecision) -> Bool {
        if case .startRun = decision { return true }
        return false
    }

    // MARK: - Runs and batches

    @Test("a request that finds its tenant idle starts a run at once, and the run takes it in its first batch")
    func idleTenantStartsRun() throws {
        let batcher = Batcher()
        let starts = batcher.submit("a")
        let run = try #require(starts.run)
        #expect(!starts.stallWatch)
        #expect(!starts.deadlineWatch)
        #expect(batcher.take(run) == ["a"])
    }

    @Test("a request that finds a run under way waits for it; the first of them starts the tenant's stall watch")
    func busyTenantWaits() {
        let batcher = Batcher()
        batcher.submit("a")
        #expect(batcher.submit("b") == Machine.Starts(run: nil, stallWatch: true, deadlineWatch: false))
        #expect(batcher.submit("c") == Machine.Starts())
    }

    @Test("requests that arrive while a run works go together into its next batch, in arrival order")
    func nextBatchGathers() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a")
        #expect(batcher.take(run) == ["a"])
        for name in ["b", "c", "d"] { batcher.submit(name) }
        #expect(batcher.take(run, endingRunWhenEmpty: false) == ["b", "c", "d"])
        #expect(batcher.answer(["a"], of: run) == ["a"])
    }

    @Test("a batch takes at most maximumBatch requests; the rest wait for the next one")
    func maximumBatch() {
        let batcher = Batcher(maximumBatch: 2)
        let run = batcher.startRun(with: "a")
        for name in ["b", "c"] { batcher.submit(name) }
        #expect(batcher.take(run) == ["a", "b"])
        #expect(batcher.take(run, endingRunWhenEmpty: false) == ["c"])
    }

    @Test("a request whose key is busy waits for the next batch after its key is freed, holding up none of the others")
    func busyKeyWaits() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a1")
        #expect(batcher.take(run) == ["a1"])
        batcher.submit("a2", key: "a1")
        batcher.submit("b")
        // a2's key is a1's, whose batch has not answered: b goes without it.
        #expect(batcher.take(run, endingRunWhenEmpty: false) == ["b"])
        #expect(batcher.take(run, endingRunWhenEmpty: false) == nil)
        #expect(batcher.answer(["a1"], of: run) == ["a1"])
        #expect(batcher.take(run, endingRunWhenEmpty: false) == ["a2"])
    }

    @Test("two requests with one key never share a batch")
    func sameKeyNeverShares() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a1")
        batcher.submit("a2", key: "a1")
        batcher.submit("b")
        #expect(batcher.take(run) == ["a1", "b"])
    }

    @Test("equal keys of two tenants are different keys, and each tenant gets a run of its own")
    func tenantsApart() {
        let batcher = Batcher()
        let one = batcher.submit("a", key: "chat", tenant: "one").run
        let two = batcher.submit("b", key: "chat", tenant: "two").run
        #expect(one != nil && two != nil && one != two)
        #expect(batcher.take(one!) == ["a"])
        #expect(batcher.take(two!) == ["b"])
        #expect(batcher.runsUnderWay == 2)
    }

    @Test("a run with batches still to answer does not end when nothing waits; asked again after answering, it ends")
    func runEndsOnlyWhenAllowed() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a")
        #expect(batcher.take(run) == ["a"])
        #expect(batcher.take(run, endingRunWhenEmpty: false) == nil)
        #expect(!batcher.hasEnded(run))
        // Meanwhile another request joins the run's tenant: it waits for this run.
        #expect(batcher.submit("b").run == nil)
        _ = batcher.answer(["a"], of: run)
        #expect(batcher.take(run) == ["b"])
        _ = batcher.answer(["b"], of: run)
        #expect(batcher.take(run) == nil)
        #expect(batcher.hasEnded(run))
        #expect(batcher.runFinished(run))
        // The tenant is idle again: the next request starts a new run.
        #expect(batcher.submit("c").run != nil)
    }

    @Test("an ended run takes nothing more, however often it asks, and requests after it start a new run")
    func endedRunStaysEnded() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a")
        #expect(batcher.take(run) == ["a"])
        _ = batcher.answer(["a"], of: run)
        #expect(batcher.take(run) == nil)
        #expect(batcher.take(run) == nil)
        let next = batcher.startRun(with: "b")
        #expect(next != run)
        #expect(batcher.take(run) == nil)
        #expect(batcher.take(next) == ["b"])
    }

    @Test("with concurrentRuns 2, the second request starts a second run, the third waits")
    func concurrentRuns() {
        let batcher = Batcher(concurrentRuns: 2)
        #expect(batcher.submit("a").run != nil)
        #expect(batcher.submit("b").run != nil)
        let third = batcher.submit("c")
        #expect(third.run == nil && third.stallWatch)
    }

    @Test("a batch's answers go to its requests in order, once")
    func answersInOrder() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a")
        for name in ["b", "c"] { batcher.submit(name) }
        #expect(batcher.take(run) == ["a", "b", "c"])
        #expect(batcher.answer(["a", "b", "c"], of: run) == ["a", "b", "c"])
        #expect(batcher.answer(["a", "b", "c"], of: run) == [nil, nil, nil])
    }

    @Test("a run that fails hands back every request it took and had not answered, once; none when it had none")
    func abandonUnanswered() {
        let batcher = Batcher(maximumBatch: 1)
        let run = batcher.startRun(with: "a")
        batcher.submit("b")
        batcher.submit("c")
        #expect(batcher.take(run) == ["a"])
        #expect(batcher.take(run, endingRunWhenEmpty: false) == ["b"])
        _ = batcher.answer(["a"], of: run)
        #expect(batcher.abandonUnanswered(of: run) == ["b"])
        #expect(batcher.abandonUnanswered(of: run).isEmpty)
        // c still waits, and the run takes it.
        #expect(batcher.take(run) == ["c"])
    }

    @Test("a failed run's requests free their keys: a retry on the same key is taken next")
    func abandonFreesKeys() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a1")
        #expect(batcher.take(run) == ["a1"])
        batcher.submit("a2", key: "a1")
        #expect(batcher.abandonUnanswered(of: run) == ["a1"])
        #expect(batcher.take(run) == ["a2"])
    }

    // MARK: - Cancellation

    @Test("a cancelled request that waits is answered at once and withdrawn: no batch takes it")
    func cancelWaiting() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a")
        batcher.submit("b")
        batcher.submit("c")
        #expect(batcher.cancel("b") == "b")
        #expect(batcher.cancel("b") == nil)
        #expect(batcher.take(run) == ["a", "c"])
    }

    @Test("a cancelled request that a batch took is answered at once; its key stays busy until the batch answers, whose answer for it is dropped")
    func cancelTaken() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a1")
        #expect(batcher.take(run) == ["a1"])
        #expect(batcher.cancel("a1") == "a1")
        #expect(!batcher.isPending("a1"))
        // A retry of it waits for the batch that may still commit it.
        batcher.submit("a2", key: "a1")
        #expect(batcher.take(run, endingRunWhenEmpty: false) == nil)
        #expect(batcher.answer(["a1"], of: run) == [nil])
        #expect(batcher.take(run) == ["a2"])
    }

    @Test("a request answered by its batch is not answered again by a late cancellation")
    func cancelAfterAnswer() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a")
        #expect(batcher.take(run) == ["a"])
        _ = batcher.answer(["a"], of: run)
        #expect(batcher.cancel("a") == nil)
    }

    @Test("a run whose only request was cancelled still had it unanswered: a failure of the run is not passed on to the next batch")
    func abandonCancelled() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a")
        #expect(batcher.take(run) == ["a"])
        _ = batcher.cancel("a")
        #expect(batcher.abandonUnanswered(of: run) == [nil])
    }

    // MARK: - Stalls

    @Test("a stall watch starts one run more when no batch was taken for stallAfter, not before; it takes the requests whose keys are free")
    func stallStartsRun() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a1")
        #expect(batcher.take(run) == ["a1"])
        #expect(batcher.submit("b").stallWatch)
        #expect(batcher.stallCheck(at: Self.start + TimeAmount.milliseconds(49)) == .keepWatching)
        guard case .startRun(let extra) = batcher.stallCheck(at: Self.start + TimeAmount.milliseconds(50)) else {
            Issue.record("no run started")
            return
        }
        #expect(extra != run)
        #expect(batcher.take(extra, at: Self.start + TimeAmount.milliseconds(50)) == ["b"])
        #expect(batcher.runsUnderWay == 2)
    }

    @Test("the extra run takes no request behind the stalled batch's keys: with nothing else, it ends, and the watch goes on")
    func stallRunSkipsBusyKeys() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a1")
        #expect(batcher.take(run) == ["a1"])
        batcher.submit("a2", key: "a1")
        guard case .startRun(let extra) = batcher.stallCheck(at: Self.start + .seconds(1)) else {
            Issue.record("no run started")
            return
        }
        #expect(batcher.take(extra, at: Self.start + .seconds(1)) == nil)
        #expect(batcher.hasEnded(extra))
        #expect(!batcher.runFinished(extra))
        #expect(batcher.stallCheck(at: Self.start + .seconds(2)) != .stop)
        _ = batcher.answer(["a1"], of: run)
        #expect(batcher.take(run, at: Self.start + .seconds(2)) == ["a2"])
    }

    @Test("stalled runs of a tenant grow to maximumConcurrentRuns and no further")
    func stallBound() {
        let batcher = Batcher(maximumConcurrentRuns: 3)
        batcher.submit("a")
        batcher.submit("b")
        let started = (1...5).filter { Self.startsRun(batcher.stallCheck(at: Self.start + .seconds(Int64($0)))) }.count
        #expect(started == 2)
        #expect(batcher.runsUnderWay == 3)
    }

    @Test("stallAfter counts from the last batch a run took, not from when requests began to wait")
    func stallCountsFromLastBatch() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a1")
        #expect(batcher.take(run) == ["a1"])
        batcher.submit("a2", key: "a1")  // waits behind a1 all along
        batcher.submit("b")
        #expect(batcher.take(run, endingRunWhenEmpty: false, at: Self.start + TimeAmount.milliseconds(40)) == ["b"])
        #expect(batcher.stallCheck(at: Self.start + TimeAmount.milliseconds(80)) == .keepWatching)
        #expect(Self.startsRun(batcher.stallCheck(at: Self.start + TimeAmount.milliseconds(90))))
    }

    @Test("a stall watch ends when nothing of its tenant waits; the next waiting request starts another")
    func stallWatchEnds() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a")
        #expect(batcher.submit("b").stallWatch)
        #expect(batcher.take(run) == ["a", "b"])
        #expect(batcher.stallCheck(at: Self.start + .seconds(1)) == .stop)
        #expect(batcher.submit("c").stallWatch)
    }

    @Test("a stall watch stopped early (cancelled) lets the next waiting request start another")
    func stallWatchStoppedEarly() {
        let batcher = Batcher()
        batcher.submit("a")
        #expect(batcher.submit("b").stallWatch)
        batcher.stopWatching()
        #expect(batcher.submit("c").stallWatch)
    }

    // MARK: - Deadlines

    @Test("the first request with a deadline starts the deadline watch; requests without one never do")
    func deadlineWatchStarts() {
        let batcher = Batcher()
        #expect(!batcher.submit("a").deadlineWatch)
        #expect(batcher.submit("b", deadline: Self.start + .seconds(5)).deadlineWatch)
        #expect(!batcher.submit("c", deadline: Self.start + .seconds(5)).deadlineWatch)
    }

    @Test("a waiting request past its deadline is withdrawn and failed at once; no batch takes it")
    func waitingRequestExpires() {
        let batcher = Batcher()
        let run = batcher.startRun(with: "a")
        #expect(batcher.take(run) == ["a"])
        batcher.submit("b", deadline: Self.start + .seconds(5))
        batcher.submit("c", deadline: Self.start + .seconds(6))
        let early = batcher.expire(at: Self.start + .seconds(4))
        #expect(early.failed.isEmpty)
        #expect(early.lookAgainAt == Self.start + .seconds(5))
        let due = batcher.expire(at: Self.start + .seconds(5))
        #expect(due.failed == ["b"])
        #expect(due.why == [.waitingForTurn])
        #expect(due.lookAgainAt == Self.start + .seconds(6))
        _ = batcher.answer(["a"], of: run)
        #expect(batcher.take(run, at: Self.start + .seconds(5)) == ["c"])
    }

    @Test("a taken request past its deadline is failed answerGrace later, its key busy until its batch answers; the batch's answer for it is dropped")
    func takenRequestExpiresLate() {
        let batcher = Batcher()
        let deadline = Self.start + .seconds(5)
        let run = batcher.submit("a1", deadline: deadline).run!
        #expect(batcher.take(run) == ["a1"])
        let atDeadline = batcher.expire(at: deadline)
        #expect(atDeadline.failed.isEmpty)
        #expect(atDeadline.lookAgainAt == deadline + .seconds(1))
        let afterGrace = batcher.expire(at: deadline + .seconds(1))
        #expect(afterGrace.failed == ["a1"])
        #expect(afterGrace.why == [.waitingForAnswer])
        #expect(afterGrace.lookAgainAt == nil)
        batcher.submit("a2", key: "a1")
        #expect(batcher.take(run, endingRunWhenEmpty: false, at: deadline + .seconds(1)) == nil)
        #expect(batcher.answer(["a1"], of: run) == [nil])
        #expect(batcher.take(run, at: deadline + .seconds(1)) == ["a2"])
    }

    @Test("a taken request whose batch answers within the grace gets the batch's answer, not a failure")
    func batchAnswersWithinGrace() {
        let batcher = Batcher()
        let deadline = Self.start + .seconds(5)
        let run = batcher.submit("a", deadline: deadline).run!
        #expect(batcher.take(run) == ["a"])
        _ = batcher.expire(at: deadline)
        #expect(batcher.answer(["a"], of: run) == ["a"])
        let afterGrace = batcher.expire(at: deadline + .seconds(1))
        #expect(afterGrace.failed.isEmpty)
        #expect(afterGrace.lookAgainAt == nil)
    }

    @Test("the deadline watch ends once every request with a deadline is answered, and the next one starts it again")
    func deadlineWatchEnds() {
        let batcher = Batcher()
        let run = batcher.submit("a", deadline: Self.start + .seconds(5)).run!
        #expect(batcher.take(run) == ["a"])
        _ = batcher.answer(["a"], of: run)
        let look = batcher.expire(at: Self.start + TimeAmount.milliseconds(1))
        #expect(look.failed.isEmpty)
        #expect(look.lookAgainAt == nil)
        #expect(batcher.submit("b", deadline: Self.start + .seconds(6)).deadlineWatch)
    }

    @Test("a cancelled request is not failed again at its deadline")
    func cancelledNotExpired() {
        let batcher = Batcher()
        batcher.submit("a")
        batcher.submit("b", deadline: Self.start + .seconds(5))
        #expect(batcher.cancel("b") == "b")
        #expect(batcher.expire(at: Self.start + .seconds(10)).failed.isEmpty)
    }

    @Test("a deadline watch stopped early (cancelled) lets the next request with a deadline start another")
    func deadlineWatchStoppedEarly() {
        let batcher = Batcher()
        #expect(batcher.submit("a", deadline: Self.start + .seconds(5)).deadlineWatch)
        batcher.stopWatchingDeadlines()
        #expect(batcher.submit("b", deadline: Self.start + .seconds(5)).deadlineWatch)
    }

    // MARK: - Shutdown

    @Test("runsUnderWay counts the runs of every tenant until each has finished: what graceful shutdown waits for")
    func runsUnderWay() {
        let batcher = Batcher()
        let one = batcher.startRun(with: "a", tenant: "one")
        let two = batcher.startRun(with: "b", tenant: "two")
        #expect(batcher.runsUnderWay == 2)
        for (run, name) in [(one, "a"), (two, "b")] {
            #expect(batcher.take(run) == [name])
            _ = batcher.answer([name], of: run)
            #expect(batcher.take(run) == nil)
        }
        #expect(!batcher.runFinished(one))
        #expect(batcher.runFinished(two))
        #expect(batcher.runsUnderWay == 0)
    }
}
