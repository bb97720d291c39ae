@testable import Postgres
import Testing

/// The pool's rules, on a machine driven by hand: connections are strings, waiters the names
/// of the leases they answer.
@Suite("Pool state machine")
struct PoolStateMachineTests {
    typealias Machine = PoolStateMachine<String, String>

    static func machine(maximumConnections: Int = 2, maximumWaiters: Int = 10) -> Machine {
        Machine(maximumConnections: maximumConnections, maximumWaiters: maximumWaiters)
    }

    /// A pool with `connections` open and lent (through `lease`, `opened`), none idle.
    static func lentOut(_ connections: [String], maximumWaiters: Int = 10) -> Machine {
        var machine = Self.machine(maximumConnections: connections.count, maximumWaiters: maximumWaiters)
        for connection in connections {
            let value1 = machine.lease()
            #expect(value1 == .grant(.openSlot))
            machine.opened(connection)
        }
        return machine
    }

    // MARK: - Leases

    @Test("a lease opens a connection while fewer than maximumConnections are open, then waits")
    func opensUpToMaximum() {
        var machine = Self.machine(maximumConnections: 2)
        let value2 = machine.lease()
        #expect(value2 == .grant(.openSlot))
        let value3 = machine.lease()
        #expect(value3 == .grant(.openSlot))
        let value4 = machine.lease()
        #expect(value4 == .wait)
        #expect(machine.usage == (open: 2, leased: 2, waiting: 0))
    }

    @Test("an idle connection is lent before a new one is opened, the most recently used first")
    func idleFirst() {
        var machine = Self.lentOut(["a", "b"])
        _ = machine.release("a", .reusable)
        _ = machine.release("b", .reusable)
        let value5 = machine.lease()
        #expect(value5 == .grant(.connection("b")))
        let value6 = machine.lease()
        #expect(value6 == .grant(.connection("a")))
    }

    @Test("a lease that finds a connection come back between its first look and its wait takes it instead of waiting")
    func lookAgainBeforeWaiting() {
        var machine = Self.lentOut(["a"])
        let value7 = machine.lease()
        #expect(value7 == .wait)
        _ = machine.release("a", .reusable)
        let value8 = machine.wait(1, "w1", isCancelled: false)
        #expect(value8 == .grant(.connection("a")))
        #expect(machine.usage.waiting == 0)
    }

    @Test("a released connection goes to the longest waiter, in arrival order")
    func handOverInOrder() {
        var machine = Self.lentOut(["a", "b"])
        let value9 = machine.wait(1, "w1", isCancelled: false)
        #expect(value9 == .waiting)
        let value10 = machine.wait(2, "w2", isCancelled: false)
        #expect(value10 == .waiting)
        guard case .handOver("b", to: "w1") = machine.release("b", .reusable) else { Issue.record("not handed to w1"); return }
        guard case .handOver("a", to: "w2") = machine.release("a", .reusable) else { Issue.record("not handed to w2"); return }
        #expect(machine.usage == (open: 2, leased: 2, waiting: 0))
    }

    @Test("a released connection that no one waits for stays open and idle")
    func keptIdle() {
        var machine = Self.lentOut(["a"])
        guard case .keep = machine.release("a", .reusable) else { Issue.record("not kept"); return }
        #expect(machine.usage == (open: 1, leased: 0, waiting: 0))
        #expect(machine.open == ["a"])
    }

    @Test("at most maximumWaiters leases wait; one more fails at once")
    func waitersBounded() {
        var machine = Self.lentOut(["a"], maximumWaiters: 2)
        let value11 = machine.wait(1, "w1", isCancelled: false)
        #expect(value11 == .waiting)
        let value12 = machine.wait(2, "w2", isCancelled: false)
        #expect(value12 == .waiting)
        let value13 = machine.wait(3, "w3", isCancelled: false)
        #expect(value13 == .fail(.exhausted(waiting: 2)))
        // A place freed is taken again.
        let value14 = machine.timeOut(1)
        #expect(value14 == "w1")
        let value15 = machine.wait(4, "w4", isCancelled: false)
        #expect(value15 == .waiting)
    }

    @Test("a lease cancelled before it waits fails and does not wait")
    func cancelledBeforeWaiting() {
        var machine = Self.lentOut(["a"])
        let value16 = machine.wait(1, "w1", isCancelled: true)
        #expect(value16 == .fail(.cancelled))
        #expect(machine.usage.waiting == 0)
    }

    @Test("a cancelled waiter is answered once and skipped when a connection comes back")
    func cancelledWaiter() {
        var machine = Self.lentOut(["a"])
        _ = machine.wait(1, "w1", isCancelled: false)
        _ = machine.wait(2, "w2", isCancelled: false)
        let value17 = machine.cancel(1)
        #expect(value17 == "w1")
        let value18 = machine.cancel(1)
        #expect(value18 == nil)
        guard case .handOver("a", to: "w2") = machine.release("a", .reusable) else { Issue.record("not handed to w2"); return }
    }

    @Test("a waiter past its deadline is failed once, and what it waited for goes to the next one or stays free")
    func timedOutWaiter() {
        var machine = Self.lentOut(["a"])
        _ = machine.wait(1, "w1", isCancelled: false)
        let value19 = machine.timeOut(1)
        #expect(value19 == "w1")
        // A timer that fires after the waiter was served finds no one.
        let value20 = machine.timeOut(1)
        #expect(value20 == nil)
        guard case .keep = machine.release("a", .reusable) else { Issue.record("not kept"); return }
        let value21 = machine.lease()
        #expect(value21 == .grant(.connection("a")))
    }

    @Test("a waiter past its deadline leaves its slot free: a freed slot is not held for it")
    func timedOutWaiterLeavesSlotFree() {
        var machine = Self.lentOut(["a"])
        _ = machine.wait(1, "w1", isCancelled: false)
        let value22 = machine.timeOut(1)
        #expect(value22 == "w1")
        _ = machine.release("a", .unusable)
        let value23 = machine.slotFreed()
        #expect(value23 == nil)
        #expect(machine.usage == (open: 0, leased: 0, waiting: 0))
        let value24 = machine.lease()
        #expect(value24 == .grant(.openSlot))
    }

    @Test("waiters answered otherwise do not pile up in the waiting order")
    func orderStaysBounded() {
        var machine = Self.lentOut(["a"], maximumWaiters: 1000)
        for id in 0..<10_000 {
            let value25 = machine.wait(id, "w\(id)", isCancelled: false)
            #expect(value25 == .waiting)
            let value26 = machine.timeOut(id)
            #expect(value26 == "w\(id)")
        }
        _ = machine.wait(10_000, "last", isCancelled: false)
        guard case .handOver("a", to: "last") = machine.release("a", .reusable) else { Issue.record("not handed over"); return }
    }

    // MARK: - Broken connections and slots

    @Test("an unusable connection is closed, and its slot, once freed, goes to the longest waiter to open a new one")
    func unusableFreesSlotToWaiter() {
        var machine = Self.lentOut(["a"])
        _ = machine.wait(1, "w1", isCancelled: false)
        guard case .close("a") = machine.release("a", .unusable) else { Issue.record("not closed"); return }
        #expect(machine.open.isEmpty)
        // Until it is closed, the slot is still taken: nothing more may open.
        #expect(machine.usage.open == 1)
        let value27 = machine.slotFreed()
        #expect(value27 == "w1")
        #expect(machine.usage == (open: 1, leased: 1, waiting: 0))
    }

    @Test("a freed slot with no waiter is free: the open count drops and the next lease opens")
    func slotFreedWithoutWaiter() {
        var machine = Self.lentOut(["a", "b"])
        _ = machine.release("a", .unusable)
        let value28 = machine.slotFreed()
        #expect(value28 == nil)
        #expect(machine.usage == (open: 1, leased: 1, waiting: 0))
        let value29 = machine.lease()
        #expect(value29 == .grant(.openSlot))
    }

    @Test("a failed opening frees its slot")
    func failedOpening() {
        var machine = Self.machine(maximumConnections: 1)
        let value30 = machine.lease()
        #expect(value30 == .grant(.openSlot))
        let value31 = machine.lease()
        #expect(value31 == .wait)
        let value32 = machine.slotFreed()
        #expect(value32 == nil)
        let value33 = machine.lease()
        #expect(value33 == .grant(.openSlot))
    }

    @Test("an idle connection the server dropped is replaced in its own slot: the count stays, the watchdog forgets it")
    func replaceDropped() {
        var machine = Self.lentOut(["a"])
        _ = machine.release("a", .reusable)
        let value34 = machine.lease()
        #expect(value34 == .grant(.connection("a")))
        machine.replace("a")
        machine.opened("a2")
        #expect(machine.open == ["a2"])
        #expect(machine.usage == (open: 1, leased: 1, waiting: 0))
    }

    @Test("a connection whose given-up call still runs keeps its slot until it is closed, and the watchdog forgets it")
    func abandonedKeepsSlot() {
        var machine = Self.lentOut(["a"])
        machine.releaseAbandoned("a")
        #expect(machine.open.isEmpty)
        let value35 = machine.lease()
        #expect(value35 == .wait)
        let value36 = machine.wait(1, "w1", isCancelled: false)
        #expect(value36 == .waiting)
        let value37 = machine.slotFreed()
        #expect(value37 == "w1")
    }

    // MARK: - Closing

    @Test("closing hands back the idle connections with their slots, and refuses later leases")
    func closingIdle() {
        var machine = Self.lentOut(["a", "b", "c"])
        _ = machine.release("a", .reusable)
        let (idle, waiters) = machine.close()
        #expect(idle == ["a"])
        #expect(waiters.isEmpty)
        #expect(machine.usage == (open: 2, leased: 2, waiting: 0))
        #expect(machine.open == ["b", "c"])
        let value38 = machine.lease()
        #expect(value38 == .fail(.closed))
        let value39 = machine.wait(1, "w1", isCancelled: false)
        #expect(value39 == .fail(.closed))
    }

    @Test("closing fails every waiting lease, in arrival order, once")
    func closingWaiters() {
        var machine = Self.lentOut(["a"])
        _ = machine.wait(1, "w1", isCancelled: false)
        _ = machine.wait(2, "w2", isCancelled: false)
        let (idle, waiters) = machine.close()
        #expect(idle.isEmpty)
        #expect(waiters == ["w1", "w2"])
        let value40 = machine.cancel(1)
        #expect(value40 == nil)
        let value41 = machine.timeOut(2)
        #expect(value41 == nil)
    }

    @Test("after closing, a connection that comes back is closed, and its slot is not handed on")
    func closedPoolClosesReturns() {
        var machine = Self.lentOut(["a"])
        _ = machine.close()
        guard case .close("a") = machine.release("a", .reusable) else { Issue.record("not closed"); return }
        let value42 = machine.slotFreed()
        #expect(value42 == nil)
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
