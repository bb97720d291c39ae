import NIOCore
@testable import ReceiptsStore
import Testing

/// The batcher's rules, on a machine driven by hand: requests are strings, the answers the
/// machine hands back are the names of the requests they answer, and time is what each test
/// says it is.
@Suite("Batching state machine")
struct BatchingStateMachineTests {
    typealias Machine = BatchingStateMachine<String, String>

    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func machine(
        maximumBatch: Int = 100, concurrentRuns: Int = 1, maximumConcurrentRuns: Int = 4
    ) -> Machine {
        Machine(
            .init(
                maximumBatch: maximumBatch, concurrentRuns: concurrentRuns, maximumConcurrentRuns: maximumConcurrentRuns,
                stallAfter: .milliseconds(50), answerGrace: .seconds(1)))
    }

    /// Request `id` of `tenant`, keyed by `key` (its name when not said), its waiter named after it.
    struct Requests {
        var next = 0

        mutating func make(_ name: String, key: String? = nil, tenant: String = "t", deadline: NIODeadline? = nil) -> QueuedRequest<String> {
            self.next += 1
            return QueuedRequest(id: self.next, request: name, key: [tenant, key ?? name], deadline: deadline)
        }
    }

    /// Submits and returns what it started.
    @discardableResult
    static func submit(_ request: QueuedRequest<String>, to machine: inout Machine, tenant: String = "t") -> Machine.Starts {
        machine.submit(request, tenant: tenant, waiter: request.request)
    }

    static func names(_ next: Machine.NextBatch) -> [String]? {
        guard case .batch(let batch) = next else { return nil }
        return batch.map(\.request)
    }

    /// "batch", "nothingYet" or "ended".
    static func kind(_ next: Machine.NextBatch) -> String {
        switch next {
        case .batch: "batch"
        case .nothingYet: "nothingYet"
        case .ended: "ended"
        }
    }

    static func ids(_ next: Machine.NextBatch) -> [Int] {
        guard case .batch(let batch) = next else { return [] }
        return batch.map(\.id)
    }

    // MARK: - Runs and batches

    @Test("a request that finds its tenant idle starts a run at once, and the run takes it in its first batch")
    func idleTenantStartsRun() throws {
        var machine = Self.machine()
        var requests = Requests()
        let starts = Self.submit(requests.make("a"), to: &machine)
        let run = try #require(starts.run)
        #expect(!starts.stallWatch)
        #expect(!starts.deadlineWatch)
        let value1 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        #expect(value1 == ["a"])
    }

    @Test("a request that finds a run under way waits for it; the first of them starts the tenant's stall watch")
    func busyTenantWaits() {
        var machine = Self.machine()
        var requests = Requests()
        _ = Self.submit(requests.make("a"), to: &machine)
        let second = Self.submit(requests.make("b"), to: &machine)
        #expect(second == Machine.Starts(run: nil, stallWatch: true, deadlineWatch: false))
        let third = Self.submit(requests.make("c"), to: &machine)
        #expect(third == Machine.Starts())
    }

    @Test("requests that arrive while a run works go together into its next batch, in arrival order")
    func nextBatchGathers() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a"), to: &machine).run!
        let first = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        for name in ["b", "c", "d"] { Self.submit(requests.make(name), to: &machine) }
        let value2 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: false, now: Self.start))
        #expect(value2 == ["b", "c", "d"])
        let value3 = machine.answer(Self.ids(first), of: run)
        #expect(value3 == ["a"])
    }

    @Test("a batch takes at most maximumBatch requests; the rest wait for the next one")
    func maximumBatch() {
        var machine = Self.machine(maximumBatch: 2)
        var requests = Requests()
        let run = Self.submit(requests.make("a"), to: &machine).run!
        for name in ["b", "c"] { Self.submit(requests.make(name), to: &machine) }
        let value4 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        #expect(value4 == ["a", "b"])
        let value5 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: false, now: Self.start))
        #expect(value5 == ["c"])
    }

    @Test("a request whose key is busy waits for the next batch after its key is freed, behind none of the others")
    func busyKeyWaits() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a1", key: "chat"), to: &machine).run!
        let first = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        Self.submit(requests.make("a2", key: "chat"), to: &machine)
        Self.submit(requests.make("b", key: "other"), to: &machine)
        // a2's key is a1's, whose batch has not answered: b goes without it.
        let second = machine.nextBatch(for: run, endingRunWhenEmpty: false, now: Self.start)
        #expect(Self.names(second) == ["b"])
        let value6 = machine.nextBatch(for: run, endingRunWhenEmpty: false, now: Self.start)
        #expect(Self.kind(value6) == "nothingYet")
        let value7 = machine.answer(Self.ids(first), of: run)
        #expect(value7 == ["a1"])
        let value8 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: false, now: Self.start))
        #expect(value8 == ["a2"])
    }

    @Test("two requests with one key never share a batch")
    func sameKeyNeverShares() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a1", key: "chat"), to: &machine).run!
        Self.submit(requests.make("a2", key: "chat"), to: &machine)
        Self.submit(requests.make("b", key: "other"), to: &machine)
        let value9 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        #expect(value9 == ["a1", "b"])
    }

    @Test("equal keys of two tenants are different keys, and each tenant gets a run of its own")
    func tenantsApart() {
        var machine = Self.machine()
        var requests = Requests()
        let one = Self.submit(requests.make("a", key: "chat", tenant: "one"), to: &machine, tenant: "one").run
        let two = Self.submit(requests.make("b", key: "chat", tenant: "two"), to: &machine, tenant: "two").run
        #expect(one != nil && two != nil && one != two)
        let value10 = Self.names(machine.nextBatch(for: one!, endingRunWhenEmpty: true, now: Self.start))
        #expect(value10 == ["a"])
        let value11 = Self.names(machine.nextBatch(for: two!, endingRunWhenEmpty: true, now: Self.start))
        #expect(value11 == ["b"])
        #expect(machine.runsUnderWay == 2)
    }

    @Test("a run with batches still to answer does not end when nothing waits; asked again after answering, it ends")
    func runEndsOnlyWhenAllowed() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a"), to: &machine).run!
        let batch = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        let value12 = machine.nextBatch(for: run, endingRunWhenEmpty: false, now: Self.start)
        #expect(Self.kind(value12) == "nothingYet")
        #expect(!machine.hasEnded(run))
        // Meanwhile another request joins the run's tenant: it waits for this run.
        let value13 = Self.submit(requests.make("b"), to: &machine)
        #expect(value13.run == nil)
        _ = machine.answer(Self.ids(batch), of: run)
        let value14 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        #expect(value14 == ["b"])
        _ = machine.answer([2], of: run)
        let value15 = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        #expect(Self.kind(value15) == "ended")
        #expect(machine.hasEnded(run))
        let value16 = machine.runFinished(run)
        #expect(value16)
        // The tenant is idle again: the next request starts a new run.
        let value17 = Self.submit(requests.make("c"), to: &machine)
        #expect(value17.run != nil)
    }

    @Test("an ended run gets nothing more, and ending it twice changes nothing")
    func endedRunStaysEnded() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a"), to: &machine).run!
        _ = machine.answer(Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)), of: run)
        let value18 = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        #expect(Self.kind(value18) == "ended")
        let value19 = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        #expect(Self.kind(value19) == "ended")
        let next = Self.submit(requests.make("b"), to: &machine)
        #expect(next.run != nil)
        let value20 = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        #expect(Self.kind(value20) == "ended")
        let value21 = Self.names(machine.nextBatch(for: next.run!, endingRunWhenEmpty: true, now: Self.start))
        #expect(value21 == ["b"])
    }

    @Test("with concurrentRuns 2, the second request starts a second run, the third waits")
    func concurrentRuns() {
        var machine = Self.machine(concurrentRuns: 2)
        var requests = Requests()
        let value22 = Self.submit(requests.make("a"), to: &machine)
        #expect(value22.run != nil)
        let value23 = Self.submit(requests.make("b"), to: &machine)
        #expect(value23.run != nil)
        let third = Self.submit(requests.make("c"), to: &machine)
        #expect(third.run == nil && third.stallWatch)
    }

    @Test("a batch's answers go to its requests in order")
    func answersInOrder() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a"), to: &machine).run!
        for name in ["b", "c"] { Self.submit(requests.make(name), to: &machine) }
        let batch = Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        let value24 = machine.answer(batch, of: run)
        #expect(value24 == ["a", "b", "c"])
        // Answered once: a second answer finds no one.
        let value25 = machine.answer(batch, of: run)
        #expect(value25 == [nil, nil, nil])
    }

    @Test("a run that fails hands back every request it took and had not answered, once; none when it had none")
    func abandonUnanswered() {
        var machine = Self.machine(maximumBatch: 1)
        var requests = Requests()
        let run = Self.submit(requests.make("a"), to: &machine).run!
        Self.submit(requests.make("b"), to: &machine)
        Self.submit(requests.make("c"), to: &machine)
        let first = Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        _ = machine.nextBatch(for: run, endingRunWhenEmpty: false, now: Self.start)
        _ = machine.answer(first, of: run)
        let value26 = machine.abandonUnanswered(of: run)
        #expect(value26 == ["b"])
        let value27 = machine.abandonUnanswered(of: run)
        #expect(value27.isEmpty)
        // b's key is free, c still waits and a run takes it.
        let value28 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        #expect(value28 == ["c"])
    }

    // MARK: - Cancellation

    @Test("a cancelled request that waits is answered at once and withdrawn: no batch takes it")
    func cancelWaiting() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a"), to: &machine).run!
        let b = requests.make("b")
        Self.submit(b, to: &machine)
        Self.submit(requests.make("c"), to: &machine)
        let value29 = machine.cancel(b.id)
        #expect(value29 == "b")
        let value30 = machine.cancel(b.id)
        #expect(value30 == nil)
        let value31 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        #expect(value31 == ["a", "c"])
    }

    @Test("a cancelled request that a batch took is answered at once; its key stays busy until the batch answers, whose answer for it is dropped")
    func cancelTaken() {
        var machine = Self.machine()
        var requests = Requests()
        let a1 = requests.make("a1", key: "chat")
        let run = Self.submit(a1, to: &machine).run!
        let batch = Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        let value32 = machine.cancel(a1.id)
        #expect(value32 == "a1")
        #expect(!machine.isPending(a1.id))
        // A retry of it waits for the batch that may still commit it.
        Self.submit(requests.make("a2", key: "chat"), to: &machine)
        let value33 = machine.nextBatch(for: run, endingRunWhenEmpty: false, now: Self.start)
        #expect(Self.kind(value33) == "nothingYet")
        let value34 = machine.answer(batch, of: run)
        #expect(value34 == [nil])
        let value35 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        #expect(value35 == ["a2"])
    }

    @Test("a request answered by its batch is not answered again by a late cancellation")
    func cancelAfterAnswer() {
        var machine = Self.machine()
        var requests = Requests()
        let a = requests.make("a")
        let run = Self.submit(a, to: &machine).run!
        _ = machine.answer(Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)), of: run)
        let value36 = machine.cancel(a.id)
        #expect(value36 == nil)
    }

    @Test("a run whose only request was cancelled still counts it unanswered: its failure goes to the next batch instead")
    func abandonCancelled() {
        var machine = Self.machine()
        var requests = Requests()
        let a = requests.make("a")
        let run = Self.submit(a, to: &machine).run!
        _ = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        _ = machine.cancel(a.id)
        let value37 = machine.abandonUnanswered(of: run)
        #expect(value37 == [nil])
    }

    // MARK: - Stalls

    @Test("a stall watch starts one run more when no batch was taken for stallAfter, not before")
    func stallStartsRun() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a1", key: "locked"), to: &machine).run!
        _ = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        let value38 = Self.submit(requests.make("b", key: "free"), to: &machine)
        #expect(value38.stallWatch)
        let value39 = machine.stallCheck(of: "t", now: Self.start + .milliseconds(49))
        #expect(value39 == .keepWatching)
        guard case .startRun(let extra) = machine.stallCheck(of: "t", now: Self.start + .milliseconds(50)) else {
            Issue.record("no run started")
            return
        }
        #expect(extra != run)
        let value40 = Self.names(machine.nextBatch(for: extra, endingRunWhenEmpty: true, now: Self.start + .milliseconds(50)))
        #expect(value40 == ["b"])
        #expect(machine.runsUnderWay == 2)
    }

    @Test("the extra run takes only requests whose keys are free: one behind the stalled batch's key waits for it")
    func stallRunSkipsBusyKeys() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a1", key: "locked"), to: &machine).run!
        let stalled = Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        Self.submit(requests.make("a2", key: "locked"), to: &machine)
        guard case .startRun(let extra) = machine.stallCheck(of: "t", now: Self.start + .seconds(1)) else {
            Issue.record("no run started")
            return
        }
        // Nothing it may take: it ends, and the watch goes on while a2 waits.
        let value41 = machine.nextBatch(for: extra, endingRunWhenEmpty: true, now: Self.start + .seconds(1))
        #expect(Self.kind(value41) == "ended")
        let value42 = machine.runFinished(extra)
        #expect(value42 == false)
        let value43 = machine.stallCheck(of: "t", now: Self.start + .seconds(2))
        #expect(value43 != .stop)
        _ = machine.answer(stalled, of: run)
        let value44 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start + .seconds(2)))
        #expect(value44 == ["a2"])
    }

    @Test("stalled runs of a tenant grow to maximumConcurrentRuns and no further")
    func stallBound() {
        var machine = Self.machine(maximumConcurrentRuns: 3)
        var requests = Requests()
        _ = Self.submit(requests.make("a"), to: &machine).run!
        Self.submit(requests.make("b"), to: &machine)
        var now = Self.start
        var started = 0
        for _ in 0..<5 {
            now = now + .seconds(1)
            if case .startRun = machine.stallCheck(of: "t", now: now) { started += 1 }
        }
        #expect(started == 2)
        #expect(machine.runsUnderWay == 3)
    }

    @Test("stallAfter counts from the last batch a run took, not from when requests began to wait")
    func stallCountsFromLastBatch() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a1", key: "a"), to: &machine).run!
        _ = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        Self.submit(requests.make("a2", key: "a"), to: &machine)  // waits behind a1 all along
        Self.submit(requests.make("b"), to: &machine)
        _ = machine.nextBatch(for: run, endingRunWhenEmpty: false, now: Self.start + .milliseconds(40))
        let value45 = machine.stallCheck(of: "t", now: Self.start + .milliseconds(80))
        #expect(value45 == .keepWatching)
        if case .startRun = machine.stallCheck(of: "t", now: Self.start + .milliseconds(90)) {} else {
            Issue.record("no run started 50 ms after the last batch")
        }
    }

    @Test("a stall watch ends when nothing of its tenant waits; the next waiting request starts another")
    func stallWatchEnds() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a"), to: &machine).run!
        let value46 = Self.submit(requests.make("b"), to: &machine)
        #expect(value46.stallWatch)
        _ = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
        let value47 = machine.stallCheck(of: "t", now: Self.start + .seconds(1))
        #expect(value47 == .stop)
        let value48 = Self.submit(requests.make("c"), to: &machine)
        #expect(value48.stallWatch)
    }

    @Test("a stall watch stopped early (cancelled) lets the next waiting request start another")
    func stallWatchStoppedEarly() {
        var machine = Self.machine()
        var requests = Requests()
        _ = Self.submit(requests.make("a"), to: &machine)
        let value49 = Self.submit(requests.make("b"), to: &machine)
        #expect(value49.stallWatch)
        machine.stopWatching("t")
        let value50 = Self.submit(requests.make("c"), to: &machine)
        #expect(value50.stallWatch)
    }

    // MARK: - Deadlines

    @Test("the first request with a deadline starts the deadline watch; requests without one never do")
    func deadlineWatchStarts() {
        var machine = Self.machine()
        var requests = Requests()
        let value51 = Self.submit(requests.make("a"), to: &machine)
        #expect(!value51.deadlineWatch)
        let value52 = Self.submit(requests.make("b", deadline: Self.start + .seconds(5)), to: &machine)
        #expect(value52.deadlineWatch)
        let value53 = Self.submit(requests.make("c", deadline: Self.start + .seconds(5)), to: &machine)
        #expect(!value53.deadlineWatch)
    }

    @Test("a waiting request past its deadline is withdrawn and failed at once; no batch takes it")
    func waitingRequestExpires() {
        var machine = Self.machine()
        var requests = Requests()
        let run = Self.submit(requests.make("a"), to: &machine).run!
        let first = Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        Self.submit(requests.make("b", deadline: Self.start + .seconds(5)), to: &machine)
        Self.submit(requests.make("c", deadline: Self.start + .seconds(6)), to: &machine)
        var expired = machine.expire(now: Self.start + .seconds(4))
        #expect(expired.failures.isEmpty)
        #expect(expired.lookAgainAt == Self.start + .seconds(5))
        expired = machine.expire(now: Self.start + .seconds(5))
        #expect(expired.failures.map { $0.waiter } == ["b"])
        #expect(expired.failures.map { $0.expiry } == [.waitingForTurn])
        #expect(expired.lookAgainAt == Self.start + .seconds(6))
        _ = machine.answer(first, of: run)
        let value54 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start + .seconds(5)))
        #expect(value54 == ["c"])
    }

    @Test("a taken request past its deadline is failed answerGrace later, its key busy until its batch answers; the batch's answer for it is dropped")
    func takenRequestExpiresLate() {
        var machine = Self.machine()
        var requests = Requests()
        let deadline = Self.start + .seconds(5)
        let run = Self.submit(requests.make("a1", key: "chat", deadline: deadline), to: &machine).run!
        let batch = Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        var expired = machine.expire(now: deadline)
        #expect(expired.failures.isEmpty)
        #expect(expired.lookAgainAt == deadline + .seconds(1))
        expired = machine.expire(now: deadline + .seconds(1))
        #expect(expired.failures.map { $0.waiter } == ["a1"])
        #expect(expired.failures.map { $0.expiry } == [.waitingForAnswer])
        #expect(expired.lookAgainAt == nil)
        Self.submit(requests.make("a2", key: "chat"), to: &machine)
        let value55 = machine.nextBatch(for: run, endingRunWhenEmpty: false, now: deadline + .seconds(1))
        #expect(Self.kind(value55) == "nothingYet")
        let value56 = machine.answer(batch, of: run)
        #expect(value56 == [nil])
        let value57 = Self.names(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: deadline + .seconds(1)))
        #expect(value57 == ["a2"])
    }

    @Test("a taken request whose batch answers within the grace gets the batch's answer, not a failure")
    func batchAnswersWithinGrace() {
        var machine = Self.machine()
        var requests = Requests()
        let deadline = Self.start + .seconds(5)
        let run = Self.submit(requests.make("a", deadline: deadline), to: &machine).run!
        let batch = Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start))
        _ = machine.expire(now: deadline)
        let value58 = machine.answer(batch, of: run)
        #expect(value58 == ["a"])
        let expired = machine.expire(now: deadline + .seconds(1))
        #expect(expired.failures.isEmpty)
        #expect(expired.lookAgainAt == nil)
    }

    @Test("the deadline watch ends once every request with a deadline is answered, and the next one starts it again")
    func deadlineWatchEnds() {
        var machine = Self.machine()
        var requests = Requests()
        let a = requests.make("a", deadline: Self.start + .seconds(5))
        let run = Self.submit(a, to: &machine).run!
        _ = machine.answer(Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)), of: run)
        let expired = machine.expire(now: Self.start + .milliseconds(1))
        #expect(expired.failures.isEmpty)
        #expect(expired.lookAgainAt == nil)
        let value59 = Self.submit(requests.make("b", deadline: Self.start + .seconds(6)), to: &machine)
        #expect(value59.deadlineWatch)
    }

    @Test("a cancelled request is not failed again at its deadline")
    func cancelledNotExpired() {
        var machine = Self.machine()
        var requests = Requests()
        _ = Self.submit(requests.make("a"), to: &machine)
        let b = requests.make("b", deadline: Self.start + .seconds(5))
        Self.submit(b, to: &machine)
        let value60 = machine.cancel(b.id)
        #expect(value60 == "b")
        let value61 = machine.expire(now: Self.start + .seconds(10))
        #expect(value61.failures.isEmpty)
    }

    @Test("a deadline watch stopped early (cancelled) lets the next request with a deadline start another")
    func deadlineWatchStoppedEarly() {
        var machine = Self.machine()
        var requests = Requests()
        let value62 = Self.submit(requests.make("a", deadline: Self.start + .seconds(5)), to: &machine)
        #expect(value62.deadlineWatch)
        machine.stopWatchingDeadlines()
        let value63 = Self.submit(requests.make("b", deadline: Self.start + .seconds(5)), to: &machine)
        #expect(value63.deadlineWatch)
    }

    // MARK: - Shutdown

    @Test("runsUnderWay counts the runs of every tenant until each is finished: what graceful shutdown waits for")
    func runsUnderWay() {
        var machine = Self.machine()
        var requests = Requests()
        let one = Self.submit(requests.make("a", tenant: "one"), to: &machine, tenant: "one").run!
        let two = Self.submit(requests.make("b", tenant: "two"), to: &machine, tenant: "two").run!
        #expect(machine.runsUnderWay == 2)
        for run in [one, two] {
            _ = machine.answer(Self.ids(machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)), of: run)
            let value64 = machine.nextBatch(for: run, endingRunWhenEmpty: true, now: Self.start)
            #expect(Self.kind(value64) == "ended")
        }
        let value65 = machine.runFinished(one)
        #expect(value65 == false)
        let value66 = machine.runFinished(two)
        #expect(value66 == true)
        #expect(machine.runsUnderWay == 0)
    }
}
