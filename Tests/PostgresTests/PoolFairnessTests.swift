@testable import Postgres
import Testing

/// Which flows are active (`FlowActivity`), with `now` given by hand.
@Suite("Flow activity")
struct FlowActivityTests {
    @Test("begin and end count the flows with work under way, a flow with several under way once")
    func beginEndCounting() {
        var activity = FlowActivity<String>(window: 100)
        #expect(activity.count == 0)
        activity.begin("a", now: 0)
        activity.begin("a", now: 0)
        activity.begin("b", now: 0)
        #expect(activity.count == 2)
        #expect(activity.isActive("a"))
        #expect(activity.isActive("b"))
        #expect(!activity.isActive("c"))
        // One of a's two ends: still under way.
        activity.end("a", now: 10)
        #expect(activity.isActive("a"))
        #expect(activity.count == 2)
        // An end without a begin changes nothing.
        activity.end("c", now: 10)
        #expect(!activity.isActive("c"))
        #expect(activity.count == 2)
        // Under way, a flow never expires.
        activity.expire(now: 1_000_000)
        #expect(activity.count == 2)
    }

    @Test("a flow whose work ended stays active until window has passed, then is not")
    func window() {
        var activity = FlowActivity<String>(window: 100)
        activity.begin("a", now: 0)
        activity.end("a", now: 10)
        #expect(activity.isActive("a"))
        #expect(activity.count == 1)
        activity.expire(now: 109)
        #expect(activity.isActive("a"))
        activity.expire(now: 110)
        #expect(!activity.isActive("a"))
        #expect(activity.count == 0)
    }

    @Test("a flow that works again inside its window is counted once, and its window runs from its latest end")
    func workAgainInsideWindow() {
        var activity = FlowActivity<String>(window: 100)
        activity.begin("a", now: 0)
        activity.end("a", now: 10)
        activity.begin("a", now: 50)
        #expect(activity.count == 1)
        activity.end("a", now: 60)
        #expect(activity.count == 1)
        activity.begin("b", now: 60)
        activity.end("b", now: 70)
        #expect(activity.count == 2)
        // The end at 10 is long past, the one at 60 is not.
        activity.expire(now: 110)
        #expect(activity.isActive("a"))
        #expect(activity.count == 2)
        activity.expire(now: 160)
        #expect(!activity.isActive("a"))
        #expect(activity.isActive("b"))
        #expect(activity.count == 1)
        activity.expire(now: 170)
        #expect(activity.count == 0)
    }

    @Test("any event expires what its now has passed")
    func eventsExpire() {
        var activity = FlowActivity<String>(window: 100)
        activity.begin("a", now: 0)
        activity.end("a", now: 0)
        activity.begin("b", now: 100)
        #expect(!activity.isActive("a"))
        #expect(activity.count == 1)
    }
}

/// The pool's fairness between flows, on a machine driven by hand (as in
/// `PoolStateMachineTests`): connections are strings, waiters the names of the leases they
/// answer ("a-1" is flow "a"'s first waiting lease), and `now` is given in nanoseconds.
@Suite("Pool fairness")
struct PoolFairnessTests {
    typealias Machine = PoolStateMachine<String, String>

    /// The machine in a box, so that its events read as calls in `#expect`.
    final class Pool {
        var machine: Machine

        init(maximumConnections: Int, fairConcurrency: Int? = nil, activityWindow: Int64 = 100, maximumWaiters: Int = 100) {
            self.machine = Machine(
                maximumConnections: maximumConnections, maximumWaiters: maximumWaiters,
                fairConcurrency: fairConcurrency, activityWindow: activityWindow)
        }

        var usage: (open: Int, leased: Int, waiting: Int) { self.machine.usage }
        func lease(_ flow: String, now: Int64 = 0) -> Machine.LeaseDecision { self.machine.lease(of: flow, now: now) }
        func wait(_ id: Int, _ waiter: String, of flow: String, now: Int64 = 0) -> Machine.WaitDecision {
            self.machine.wait(id, waiter, of: flow, isCancelled: false, now: now)
        }
        func cancel(_ id: Int, now: Int64 = 0) -> String? { self.machine.cancel(id, now: now) }
        func timeOut(_ id: Int, now: Int64 = 0) -> String? { self.machine.timeOut(id, now: now) }
        func opened(_ connection: String) { self.machine.opened(connection) }
        func share(_ flow: String) -> Int { self.machine.share(of: flow) }
        func holding(_ flow: String) -> Int { self.machine.holding(of: flow) }
        func waiting(_ flow: String) -> Int { self.machine.waiting(of: flow) }

        /// Leases of `flow` granted slots at once, opened as `connections`.
        func hold(_ flow: String, _ connections: [String], now: Int64 = 0) {
            for connection in connections {
                let decision = self.lease(flow, now: now)
                #expect(decision == .grant(.openSlot), "\(flow) was not granted a slot for \(connection)")
                self.opened(connection)
            }
        }

        /// A lease of `flow` that held `connection` for `held` ends and gives it back fit for
        /// reuse, as the pool does (`leaseEnded`, `release`, `dispatch`): whom the connection
        /// went to ("keep" when no one), then whom `dispatch` granted what.
        @discardableResult
        func end(_ flow: String, _ connection: String, held: Int64 = Machine.leaseEstimate, now: Int64 = 0) -> String {
            self.machine.leaseEnded(of: flow, held: held, now: now)
            let handed: String
            switch self.machine.release(connection, .reusable, now: now) {
            case .handOver(let given, to: let waiter): handed = given == connection ? waiter : "\(waiter) got \(given)?"
            case .keep: handed = "keep"
            case .close(let closed): handed = "close \(closed)"
            }
            let dispatched = self.dispatch(now: now)
            return dispatched.isEmpty ? handed : ([handed] + dispatched).joined(separator: ", ")
        }

        /// Whom `dispatch` granted what: "waiter<-connection", or "waiter<-slot".
        func dispatch(now: Int64) -> [String] {
            self.machine.dispatch(now: now).map { waiter, grant in
                switch grant {
                case .connection(let connection): "\(waiter)<-\(connection)"
                case .openSlot: "\(waiter)<-slot"
                }
            }
        }
    }

    // MARK: - Shares

    @Test("a flow alone holds all connections but one, which a flow that arrives then finds free")
    func aloneHoldsAllButOne() {
        let pool = Pool(maximumConnections: 4, fairConcurrency: 2)
        pool.hold("a", ["c1", "c2", "c3"])
        #expect(pool.share("a") == 3)
        #expect(pool.holding("a") == 3)
        #expect(pool.lease("a") == .wait)
        #expect(pool.wait(1, "a-1", of: "a") == .waiting)
        #expect(pool.usage == (open: 3, leased: 3, waiting: 1))
        // What a gives back goes to its own waiter, still not the last one.
        #expect(pool.end("a", "c1") == "a-1")
        #expect(pool.usage == (open: 3, leased: 3, waiting: 0))
        // b arrives and is granted the last one at once.
        #expect(pool.lease("b") == .grant(.openSlot))
    }

    @Test("a flow alone in a pool of one connection may hold it")
    func aloneInPoolOfOne() {
        let pool = Pool(maximumConnections: 1)
        #expect(pool.share("a") == 1)
        pool.hold("a", ["c"])
        #expect(pool.lease("a") == .wait)
    }

    @Test("with two flows active, each holds at most its share of fairConcurrency: one past it waits beside idle connections, while the other is granted one at once")
    func twoFlowsShare() {
        let pool = Pool(maximumConnections: 10, fairConcurrency: 4)
        pool.hold("a", ["c1", "c2", "c3", "c4"])
        #expect(pool.end("a", "c4", now: 10) == "keep")
        #expect(pool.end("a", "c3", now: 10) == "keep")
        #expect(pool.holding("a") == 2)
        // b arrives: each flow's share is 4 / 2.
        #expect(pool.lease("b", now: 20) == .grant(.connection("c3")))
        #expect(pool.share("a") == 2)
        #expect(pool.share("b") == 2)
        #expect(pool.lease("a", now: 20) == .wait)
        #expect(pool.wait(1, "a-1", of: "a", now: 20) == .waiting)
        #expect(pool.usage == (open: 4, leased: 3, waiting: 1))
        #expect(pool.dispatch(now: 20).isEmpty)
        // b, within its share, is granted the idle connection, and then a slot.
        #expect(pool.lease("b", now: 20) == .grant(.connection("c4")))
        #expect(pool.lease("b", now: 20) == .wait)
        #expect(pool.holding("a") == 2)
        #expect(pool.holding("b") == 2)
    }

    @Test("a flow's share is fairConcurrency divided by the active flows, counting the one that asks, and at least one")
    func shareArithmetic() {
        let pool = Pool(maximumConnections: 20, fairConcurrency: 9)
        pool.hold("a", ["a1"])
        #expect(pool.share("b") == 4)
        pool.hold("b", ["b1"])
        pool.hold("c", ["c1"])
        #expect(pool.share("a") == 3)
        #expect(pool.share("d") == 2)
        let few = Pool(maximumConnections: 20, fairConcurrency: 2)
        few.hold("a", ["a1"])
        few.hold("b", ["b1"])
        few.hold("c", ["c1"])
        #expect(few.share("a") == 1)
        #expect(few.share("d") == 1)
        #expect(few.lease("d") == .grant(.openSlot))
    }

    @Test("a flow that went idle stays counted for activityWindow; then the flood's share rises and dispatch hands what is free to its waiters")
    func idleFlowCountedForWindow() {
        let pool = Pool(maximumConnections: 10, fairConcurrency: 4, activityWindow: 100)
        pool.hold("a", ["a1"])
        pool.hold("b", ["b1"])
        pool.hold("a", ["a2"])
        #expect(pool.lease("a") == .wait)
        #expect(pool.wait(1, "a-1", of: "a") == .waiting)
        #expect(pool.wait(2, "a-2", of: "a") == .waiting)
        // b's only lease ends at 50: its connection stays idle, a is at its share.
        #expect(pool.end("b", "b1", now: 50) == "keep")
        #expect(pool.share("a") == 2)
        #expect(pool.dispatch(now: 149).isEmpty)
        #expect(pool.usage == (open: 3, leased: 2, waiting: 2))
        // b's window has passed: a is alone.
        #expect(pool.dispatch(now: 150) == ["a-1<-b1", "a-2<-slot"])
        #expect(pool.share("a") == 9)
        #expect(pool.holding("a") == 4)
        #expect(pool.usage == (open: 4, leased: 4, waiting: 0))
    }

    @Test("the background flow is neither held back nor counted")
    func backgroundNotCappedNorCounted() {
        let background = PostgresFlow.background
        let alone = Pool(maximumConnections: 4, fairConcurrency: 2)
        alone.hold(background, ["g1", "g2"])
        alone.hold("a", ["a1", "a2"])
        // a is alone: all connections but one.
        #expect(alone.share("a") == 3)

        let pool = Pool(maximumConnections: 10, fairConcurrency: 6)
        pool.hold("a", ["a1"])
        pool.hold("b", ["b1"])
        pool.hold(background, ["g1", "g2", "g3", "g4", "g5"])
        #expect(pool.share(background) == .max)
        #expect(pool.holding(background) == 5)
        // Two flows share 6: the background flow is not a third.
        #expect(pool.share("a") == 3)
        pool.hold("a", ["a2", "a3"])
        #expect(pool.lease("a") == .wait)
        pool.hold(background, ["g6"])
        #expect(pool.usage == (open: 10, leased: 10, waiting: 0))
        // Its waiting leases do not count either.
        #expect(pool.wait(1, "g-1", of: background) == .waiting)
        #expect(pool.share("a") == 3)
        #expect(pool.end(background, "g1") == "g-1")
    }

    // MARK: - Fair order

    @Test("a connection that comes back goes to the waiting flow that has held connections least, not to the longest waiter")
    func fairOrderAcrossFlows() {
        let pool = Pool(maximumConnections: 1)
        pool.hold("a", ["c"])
        #expect(pool.wait(1, "a-1", of: "a") == .waiting)
        #expect(pool.wait(2, "a-2", of: "a") == .waiting)
        #expect(pool.lease("b") == .wait)
        #expect(pool.wait(3, "b-1", of: "b") == .waiting)
        #expect(pool.wait(4, "b-2", of: "b") == .waiting)
        #expect(pool.end("a", "c") == "b-1")
        #expect(pool.end("b", "c") == "a-1")
        #expect(pool.end("a", "c") == "b-2")
        #expect(pool.end("b", "c") == "a-2")
        #expect(pool.usage == (open: 1, leased: 1, waiting: 0))
    }

    @Test("leaseEnded charges what a lease held: a flow whose lease held long waits behind one whose lease was short, though it asked first")
    func holdTimeCharged() {
        /// a's and b's leases held the connection `aHeld` and 1 ms; then, while c holds it,
        /// a waits, then b: who is served when c gives it back.
        func served(aHeld: Int64) -> String {
            let pool = Pool(maximumConnections: 1, activityWindow: 1_000_000_000_000)
            pool.hold("a", ["c"])
            #expect(pool.end("a", "c", held: aHeld) == "keep")
            #expect(pool.lease("b") == .grant(.connection("c")))
            #expect(pool.end("b", "c", held: 1_000_000) == "keep")
            #expect(pool.lease("c") == .grant(.connection("c")))
            #expect(pool.wait(1, "a-1", of: "a") == .waiting)
            #expect(pool.wait(2, "b-1", of: "b") == .waiting)
            return pool.end("c", "c")
        }
        #expect(served(aHeld: 1_000_000) == "a-1")
        #expect(served(aHeld: 100_000_000) == "b-1")
    }

    @Test("leases of one flow that wait are served in their arrival order")
    func arrivalOrderWithinFlow() {
        let pool = Pool(maximumConnections: 1)
        pool.hold("a", ["c"])
        #expect(pool.wait(1, "a-1", of: "a") == .waiting)
        #expect(pool.wait(2, "a-2", of: "a") == .waiting)
        #expect(pool.wait(3, "a-3", of: "a") == .waiting)
        #expect(pool.waiting("a") == 3)
        #expect(pool.end("a", "c") == "a-1")
        #expect(pool.end("a", "c") == "a-2")
        #expect(pool.end("a", "c") == "a-3")
        #expect(pool.waiting("a") == 0)
    }

    @Test("a new lease of a flow whose leases wait waits behind them, even when a connection is free for it")
    func newLeaseWaitsBehindOwnWaiters() {
        let pool = Pool(maximumConnections: 10, fairConcurrency: 2, activityWindow: 100)
        pool.hold("a", ["a1"])
        pool.hold("b", ["b1"])
        #expect(pool.lease("a") == .wait)
        #expect(pool.wait(1, "a-1", of: "a") == .waiting)
        #expect(pool.end("b", "b1", now: 10) == "keep")
        // b's window has passed and b1 is idle, but a-1 came first.
        #expect(pool.lease("a", now: 110) == .wait)
        #expect(pool.dispatch(now: 110) == ["a-1<-b1"])
        #expect(pool.lease("a", now: 110) == .grant(.openSlot))
    }

    // MARK: - Waiting leases and activity

    /// A pool of three connections: a holds two (all but one, alone), the background flow
    /// the third, and a lease of b waits as `b-1` (id 1).
    static func bWaitsBesideA() -> Pool {
        let pool = Pool(maximumConnections: 3, fairConcurrency: 2, activityWindow: 100)
        pool.hold("a", ["a1", "a2"])
        pool.hold(PostgresFlow.background, ["g1"])
        #expect(pool.lease("b") == .wait)
        #expect(pool.wait(1, "b-1", of: "b") == .waiting)
        #expect(pool.share("a") == 1)
        return pool
    }

    @Test("a waiting lease keeps its flow active however long it waits", arguments: [false, true])
    func waitingKeepsActive(backgroundAsks: Bool) {
        let pool = Self.bWaitsBesideA()
        // Any event much later: b still counts.
        #expect(pool.lease(backgroundAsks ? PostgresFlow.background : "a", now: 1_000_000) == .wait)
        #expect(pool.share("a") == 1)
    }

    @Test("a waiting lease that is cancelled or times out ends its flow's activity: once its window has passed, the other flow is alone again", arguments: [false, true])
    func cancelEndsActivity(timesOut: Bool) {
        let pool = Self.bWaitsBesideA()
        #expect((timesOut ? pool.timeOut(1, now: 10) : pool.cancel(1, now: 10)) == "b-1")
        #expect(pool.waiting("b") == 0)
        #expect(pool.end("a", "a2", now: 20) == "keep")
        // Inside b's window a is still at its share...
        #expect(pool.lease("a", now: 109) == .wait)
        #expect(pool.share("a") == 1)
        // ...and alone after it.
        #expect(pool.lease("a", now: 110) == .grant(.connection("a2")))
        #expect(pool.share("a") == 2)
    }
}
