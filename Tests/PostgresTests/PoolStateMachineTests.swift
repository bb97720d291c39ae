@testable import Postgres
import Testing

/// The pool's rules, on a machine driven by hand: connections are strings, waiters the names
/// of the leases they answer.
@Suite("Pool state machine")
struct PoolStateMachineTests {
    typealias Machine = PoolStateMachine<String, String>

    /// The machine in a box, so that its events read as calls in `#expect`.
    final class Pool {
        var machine: Machine

        init(_ machine: Machine) { self.machine = machine }

        var usage: (open: Int, leased: Int, waiting: Int) { self.machine.usage }
        var open: Set<String> { self.machine.open }
        func lease() -> Machine.LeaseDecision { self.machine.lease() }
        func wait(_ id: Int, _ waiter: String, isCancelled: Bool) -> Machine.WaitDecision {
            self.machine.wait(id, waiter, isCancelled: isCancelled)
        }
        func cancel(_ id: Int) -> String? { self.machine.cancel(id) }
        func timeOut(_ id: Int) -> String? { self.machine.timeOut(id) }
        func opened(_ connection: String) { self.machine.opened(connection) }
        func replace(_ connection: String) { self.machine.replace(connection) }
        func release(_ connection: String, _ state: Machine.Return) -> Machine.ReleaseAction { self.machine.release(connection, state) }
        func releaseAbandoned(_ connection: String) { self.machine.releaseAbandoned(connection) }
        func slotFreed() -> String? { self.machine.slotFreed() }
        func close() -> (idle: [String], waiters: [String]) { self.machine.close() }
    }

    static func machine(maximumConnections: Int = 2, maximumWaiters: Int = 10) -> Pool {
        Pool(Machine(maximumConnections: maximumConnections, maximumWaiters: maximumWaiters))
    }

    /// A pool with `connections` open and lent (through `lease`, `opened`), none idle.
    static func lentOut(_ connections: [String], maximumWaiters: Int = 10) -> Pool {
        let machine = Self.machine(maximumConnections: connections.count, maximumWaiters: maximumWaiters)
        for connection in connections {
            #expect(machine.lease() == .grant(.openSlot))
            machine.opened(connection)
        }
        return machine
    }

    // MARK: - Leases

    @Test("a lease opens a connection while fewer than maximumConnections are open, then waits")
    func opensUpToMaximum() {
        let machine = Self.machine(maximumConnections: 2)
        #expect(machine.lease() == .grant(.openSlot))
        #expect(machine.lease() == .grant(.openSlot))
        #expect(machine.lease() == .wait)
        #expect(machine.usage == (open: 2, leased: 2, waiting: 0))
    }

    @Test("an idle connection is lent before a new one is opened, the most recently used first")
    func idleFirst() {
        let machine = Self.lentOut(["a", "b"])
        _ = machine.release("a", .reusable)
        _ = machine.release("b", .reusable)
        #expect(machine.lease() == .grant(.connection("b")))
        #expect(machine.lease() == .grant(.connection("a")))
    }

    @Test("a lease that finds a connection come back between its first look and its wait takes it instead of waiting")
    func lookAgainBeforeWaiting() {
        let machine = Self.lentOut(["a"])
        #expect(machine.lease() == .wait)
        _ = machine.release("a", .reusable)
        #expect(machine.wait(1, "w1", isCancelled: false) == .grant(.connection("a")))
        #expect(machine.usage.waiting == 0)
    }

    @Test("a released connection goes to the longest waiter, in arrival order")
    func handOverInOrder() {
        let machine = Self.lentOut(["a", "b"])
        #expect(machine.wait(1, "w1", isCancelled: false) == .waiting)
        #expect(machine.wait(2, "w2", isCancelled: false) == .waiting)
        guard case .handOver("b", to: "w1") = machine.release("b", .reusable) else { Issue.record("not handed to w1"); return }
        guard case .handOver("a", to: "w2") = machine.release("a", .reusable) else { Issue.record("not handed to w2"); return }
        #expect(machine.usage == (open: 2, leased: 2, waiting: 0))
    }

    @Test("a released connection that no one waits for stays open and idle")
    func keptIdle() {
        let machine = Self.lentOut(["a"])
        guard case .keep = machine.release("a", .reusable) else { Issue.record("not kept"); return }
        #expect(machine.usage == (open: 1, leased: 0, waiting: 0))
        #expect(machine.open == ["a"])
    }

    @Test("at most maximumWaiters leases wait; one more fails at once")
    func waitersBounded() {
        let machine = Self.lentOut(["a"], maximumWaiters: 2)
        #expect(machine.wait(1, "w1", isCancelled: false) == .waiting)
        #expect(machine.wait(2, "w2", isCancelled: false) == .waiting)
        #expect(machine.wait(3, "w3", isCancelled: false) == .fail(.exhausted(waiting: 2)))
        // A place freed is taken again.
        #expect(machine.timeOut(1) == "w1")
        #expect(machine.wait(4, "w4", isCancelled: false) == .waiting)
    }

    @Test("a lease cancelled before it waits fails and does not wait")
    func cancelledBeforeWaiting() {
        let machine = Self.lentOut(["a"])
        #expect(machine.wait(1, "w1", isCancelled: true) == .fail(.cancelled))
        #expect(machine.usage.waiting == 0)
    }

    @Test("a cancelled waiter is answered once and skipped when a connection comes back")
    func cancelledWaiter() {
        let machine = Self.lentOut(["a"])
        _ = machine.wait(1, "w1", isCancelled: false)
        _ = machine.wait(2, "w2", isCancelled: false)
        #expect(machine.cancel(1) == "w1")
        #expect(machine.cancel(1) == nil)
        guard case .handOver("a", to: "w2") = machine.release("a", .reusable) else { Issue.record("not handed to w2"); return }
    }

    @Test("a waiter past its deadline is failed once, and what it waited for goes to the next one or stays free")
    func timedOutWaiter() {
        let machine = Self.lentOut(["a"])
        _ = machine.wait(1, "w1", isCancelled: false)
        #expect(machine.timeOut(1) == "w1")
        // A timer that fires after the waiter was served finds no one.
        #expect(machine.timeOut(1) == nil)
        guard case .keep = machine.release("a", .reusable) else { Issue.record("not kept"); return }
        #expect(machine.lease() == .grant(.connection("a")))
    }

    @Test("a waiter past its deadline leaves its slot free: a freed slot is not held for it")
    func timedOutWaiterLeavesSlotFree() {
        let machine = Self.lentOut(["a"])
        _ = machine.wait(1, "w1", isCancelled: false)
        #expect(machine.timeOut(1) == "w1")
        _ = machine.release("a", .unusable)
        #expect(machine.slotFreed() == nil)
        #expect(machine.usage == (open: 0, leased: 0, waiting: 0))
        #expect(machine.lease() == .grant(.openSlot))
    }

    @Test("waiters answered otherwise do not pile up in the waiting order")
    func orderStaysBounded() {
        let machine = Self.lentOut(["a"], maximumWaiters: 1000)
        for id in 0..<10_000 {
            #expect(machine.wait(id, "w\(id)", isCancelled: false) == .waiting)
            #expect(machine.timeOut(id) == "w\(id)")
        }
        _ = machine.wait(10_000, "last", isCancelled: false)
        guard case .handOver("a", to: "last") = machine.release("a", .reusable) else { Issue.record("not handed over"); return }
    }

    // MARK: - Broken connections and slots

    @Test("an unusable connection is closed, and its slot, once freed, goes to the longest waiter to open a new one")
    func unusableFreesSlotToWaiter() {
        let machine = Self.lentOut(["a"])
        _ = machine.wait(1, "w1", isCancelled: false)
        guard case .close("a") = machine.release("a", .unusable) else { Issue.record("not closed"); return }
        #expect(machine.open.isEmpty)
        // Until it is closed, the slot is still taken: nothing more may open.
        #expect(machine.usage.open == 1)
        #expect(machine.slotFreed() == "w1")
        #expect(machine.usage == (open: 1, leased: 1, waiting: 0))
    }

    @Test("a freed slot with no waiter is free: the open count drops and the next lease opens")
    func slotFreedWithoutWaiter() {
        let machine = Self.lentOut(["a", "b"])
        _ = machine.release("a", .unusable)
        #expect(machine.slotFreed() == nil)
        #expect(machine.usage == (open: 1, leased: 1, waiting: 0))
        #expect(machine.lease() == .grant(.openSlot))
    }

    @Test("a failed opening frees its slot")
    func failedOpening() {
        let machine = Self.machine(maximumConnections: 1)
        #expect(machine.lease() == .grant(.openSlot))
        #expect(machine.lease() == .wait)
        #expect(machine.slotFreed() == nil)
        #expect(machine.lease() == .grant(.openSlot))
    }

    @Test("an idle connection the server dropped is replaced in its own slot: the count stays, the watchdog forgets it")
    func replaceDropped() {
        let machine = Self.lentOut(["a"])
        _ = machine.release("a", .reusable)
        #expect(machine.lease() == .grant(.connection("a")))
        machine.replace("a")
        machine.opened("a2")
        #expect(machine.open == ["a2"])
        #expect(machine.usage == (open: 1, leased: 1, waiting: 0))
    }

    @Test("a connection whose given-up call still runs keeps its slot until it is closed, and the watchdog forgets it")
    func abandonedKeepsSlot() {
        let machine = Self.lentOut(["a"])
        machine.releaseAbandoned("a")
        #expect(machine.open.isEmpty)
        #expect(machine.lease() == .wait)
        #expect(machine.wait(1, "w1", isCancelled: false) == .waiting)
        #expect(machine.slotFreed() == "w1")
    }

    // MARK: - Closing

    @Test("closing hands back the idle connections with their slots, and refuses later leases")
    func closingIdle() {
        let machine = Self.lentOut(["a", "b", "c"])
        _ = machine.release("a", .reusable)
        let (idle, waiters) = machine.close()
        #expect(idle == ["a"])
        #expect(waiters.isEmpty)
        #expect(machine.usage == (open: 2, leased: 2, waiting: 0))
        #expect(machine.open == ["b", "c"])
        #expect(machine.lease() == .fail(.closed))
        #expect(machine.wait(1, "w1", isCancelled: false) == .fail(.closed))
    }

    @Test("closing fails every waiting lease, in arrival order, once")
    func closingWaiters() {
        let machine = Self.lentOut(["a"])
        _ = machine.wait(1, "w1", isCancelled: false)
        _ = machine.wait(2, "w2", isCancelled: false)
        let (idle, waiters) = machine.close()
        #expect(idle.isEmpty)
        #expect(waiters == ["w1", "w2"])
        #expect(machine.cancel(1) == nil)
        #expect(machine.timeOut(2) == nil)
    }

    @Test("after closing, a connection that comes back is closed, and its slot is not handed on")
    func closedPoolClosesReturns() {
        let machine = Self.lentOut(["a"])
        _ = machine.close()
        guard case .close("a") = machine.release("a", .reusable) else { Issue.record("not closed"); return }
        #expect(machine.slotFreed() == nil)
        #expect(machine.usage == (open: 0, leased: 0, waiting: 0))
    }

    // MARK: - Watchdog

    @Test("the watchdog leaves a call alone until it has waited longer than the limit, then cancels it once, then abandons it")
    func watchdog() {
        let limit = Duration.seconds(10)
        let abandonAfter = Duration.seconds(1)
        func action(_ blocked: Duration?, cancelRequested: Bool = false) -> Machine.WatchdogAction? {
            Machine.watchdog(blocked: blocked, limit: limit, abandonAfter: abandonAfter, isCancelRequested: cancelRequested)
        }
        #expect(action(nil) == nil)
        #expect(action(.seconds(10)) == nil)
        #expect(action(.milliseconds(10_001)) == .cancel)
        #expect(action(.milliseconds(10_500), cancelRequested: true) == nil)
        #expect(action(.milliseconds(11_001), cancelRequested: true) == .abandon)
        #expect(action(.seconds(60)) == .abandon)
    }
}
