@testable import Postgres
import Testing

/// Start-time fair queuing across flows (`FairQueue`), driven by hand: elements are strings
/// naming their flow and arrival ("a1" is the first element of flow "a"), ids grow in arrival
/// order, and costs are plain numbers.
@Suite("Fair queue")
struct FairQueueTests {
    /// The queue in a box, so that its events read as calls.
    final class Queue {
        var queue: FairQueue<String, String>

        init(estimate: Int64 = 10, maximumFlows: Int = 100) {
            self.queue = FairQueue(estimate: estimate, maximumFlows: maximumFlows)
        }

        /// Appends `element` of `flow` as `id`.
        func append(_ id: Int, _ element: String, of flow: String) { self.queue.append(id, element, of: flow) }

        /// Appends elements of `flow` as `ids`, named flow + their place in it from `first`.
        func append(_ ids: ClosedRange<Int>, of flow: String, first: Int = 1) {
            for (offset, id) in ids.enumerated() { self.queue.append(id, "\(flow)\(first + offset)", of: flow) }
        }

        func pop(where isEligible: (String) -> Bool = { _ in true }) -> String? { self.queue.popNext(where: isEligible)?.element }

        /// The next `count` elements taken out, in order.
        func pop(_ count: Int) -> [String] { (0..<count).compactMap { _ in self.pop() } }

        func remove(_ id: Int) -> (element: String, flow: String)? { self.queue.remove(id) }
        func charge(_ flow: String, cost: Int64) { self.queue.charge(flow, cost: cost) }
        func startWithoutWaiting(_ flow: String) { self.queue.startWithoutWaiting(flow) }
        func removeAll() -> [String] { self.queue.removeAll() }
        var count: Int { self.queue.count }
        var isEmpty: Bool { self.queue.isEmpty }
        var virtualNow: Int64 { self.queue.virtualNow }
        var waitingFlows: Set<String> { self.queue.waitingFlows }
        func count(of flow: String) -> Int { self.queue.count(of: flow) }
        func virtualTime(of flow: String) -> Int64 { self.queue.virtualTime(of: flow) }
    }

    @Test("a flow with few elements is served ahead of one that floods, once the flood was charged for what it took out")
    func fewAheadOfFlood() {
        let queue = Queue(estimate: 10)
        queue.append(1...6, of: "flood")
        #expect(queue.pop(2) == ["flood1", "flood2"])
        // What the flood took out cost three times the estimate.
        queue.charge("flood", cost: 30)
        queue.charge("flood", cost: 30)
        queue.append(7, "quiet1", of: "quiet")
        #expect(queue.pop(2) == ["quiet1", "flood3"])
        #expect(queue.count(of: "flood") == 3)
        #expect(queue.count == 3)
    }

    @Test("two flows that flood take turns, whatever their arrival order")
    func floodsAlternate() {
        let queue = Queue(estimate: 10)
        queue.append(1...4, of: "a")
        queue.append(5...8, of: "b")
        #expect(queue.pop(8) == ["a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4"])
        #expect(queue.isEmpty)
        #expect(queue.pop() == nil)
    }

    @Test("charging an element's real cost above the estimate makes its flow wait longer")
    func longCostWaitsLonger() {
        func order(chargingA cost: Int64?) -> [String] {
            let queue = Queue(estimate: 10)
            queue.append(1...2, of: "a")
            queue.append(3...5, of: "b")
            var order = queue.pop(1)
            if let cost { queue.charge("a", cost: cost) }
            order += queue.pop(4)
            return order
        }
        // Charged the estimate only, the flows take turns.
        #expect(order(chargingA: nil) == ["a1", "b1", "a2", "b2", "b3"])
        #expect(order(chargingA: 10) == ["a1", "b1", "a2", "b2", "b3"])
        // a1 really cost 35: b is served until it has used as much.
        #expect(order(chargingA: 35) == ["a1", "b1", "b2", "b3", "a2"])
    }

    @Test("a flow idle for long banks no credit: it starts waiting at virtualNow, and then takes turns with the flood")
    func idleBanksNothing() {
        let queue = Queue(estimate: 10)
        queue.append(1...20, of: "flood")
        #expect(queue.pop(10) == (1...10).map { "flood\($0)" })
        #expect(queue.virtualNow == 90)
        queue.append(21...25, of: "idle")
        #expect(queue.virtualTime(of: "idle") == 90)
        // Not all five of "idle" first, as if it could spend what it did not use.
        #expect(queue.pop(6) == ["idle1", "flood11", "idle2", "flood12", "idle3", "flood13"])
    }

    @Test("a flow that starts waiting again keeps its debt: virtualNow is a floor, not a reset")
    func debtKept() {
        let queue = Queue(estimate: 10)
        queue.append(1, "heavy1", of: "heavy")
        #expect(queue.pop() == "heavy1")
        queue.charge("heavy", cost: 100)
        #expect(queue.virtualTime(of: "heavy") == 100)
        queue.append(2, "heavy2", of: "heavy")
        #expect(queue.virtualTime(of: "heavy") == 100)
        queue.append(3...5, of: "light")
        #expect(queue.virtualTime(of: "light") == 0)
        #expect(queue.pop(4) == ["light1", "light2", "light3", "heavy2"])
    }

    @Test("work that starts without waiting is charged the estimate, as if taken out")
    func startWithoutWaitingCharged() {
        let queue = Queue(estimate: 10)
        queue.startWithoutWaiting("a")
        queue.startWithoutWaiting("a")
        #expect(queue.virtualTime(of: "a") == 20)
        #expect(queue.virtualNow == 10)
        queue.append(1, "a1", of: "a")
        queue.append(2, "b1", of: "b")
        #expect(queue.virtualTime(of: "b") == 10)
        #expect(queue.pop(2) == ["b1", "a1"])
    }

    @Test("ties of virtual time go to the element that came first")
    func tiesByArrival() {
        let queue = Queue(estimate: 10)
        queue.append(1, "z1", of: "z")
        queue.append(2, "a1", of: "a")
        queue.append(3, "m1", of: "m")
        queue.append(4, "a2", of: "a")
        queue.append(5, "z2", of: "z")
        // a2 and z2 both start at 10: a2 came first.
        #expect(queue.pop(5) == ["z1", "a1", "m1", "a2", "z2"])
    }

    @Test("remove takes out a waiting element and gives its flow; an id that does not wait gives nil")
    func removeWaiting() {
        let queue = Queue(estimate: 10)
        queue.append(1...2, of: "a")
        queue.append(3, "b1", of: "b")
        let removed = queue.remove(2)
        #expect(removed?.element == "a2")
        #expect(removed?.flow == "a")
        #expect(queue.count == 2)
        #expect(queue.count(of: "a") == 1)
        // Removed already, never added, taken out: nothing.
        #expect(queue.remove(2) == nil)
        #expect(queue.remove(99) == nil)
        #expect(queue.pop() == "a1")
        #expect(queue.remove(1) == nil)
        // The last element of a flow removed: the flow waits no more.
        #expect(queue.remove(3)?.element == "b1")
        #expect(queue.waitingFlows.isEmpty)
        #expect(queue.isEmpty)
        #expect(queue.pop() == nil)
    }

    @Test("popNext(where:) takes the head of the least-used flow it accepts, and nothing, charging nothing, when it accepts none")
    func popNextEligible() {
        let queue = Queue(estimate: 10)
        queue.append(1, "a1", of: "a")
        queue.append(2, "b1", of: "b")
        queue.append(3, "c1", of: "c")
        #expect(queue.pop(where: { $0 != "a" }) == "b1")
        #expect(queue.virtualTime(of: "b") == 10)
        #expect(queue.virtualTime(of: "a") == 0)
        let before = (queue.virtualNow, queue.virtualTime(of: "a"), queue.virtualTime(of: "c"))
        #expect(queue.pop(where: { $0 == "b" || $0 == "z" }) == nil)
        #expect(queue.pop(where: { _ in false }) == nil)
        #expect(queue.count == 2)
        #expect(queue.waitingFlows == ["a", "c"])
        #expect((queue.virtualNow, queue.virtualTime(of: "a"), queue.virtualTime(of: "c")) == before)
        #expect(queue.pop(2) == ["a1", "c1"])
    }

    @Test("at most maximumFlows idle flows are remembered: many flows passing leave the counts right and forgive an idle flow's debt, never a waiting flow's place")
    func maximumFlowsBound() {
        let maximumFlows = 4
        let queue = Queue(estimate: 10, maximumFlows: maximumFlows)
        queue.startWithoutWaiting("debtor")
        queue.charge("debtor", cost: 1_000_000)
        #expect(queue.virtualTime(of: "debtor") == 1_000_000)
        queue.append(0, "waiter1", of: "waiter")
        for id in 1...1_000 {
            let flow = "f\(id)"
            queue.append(id, "\(flow)-1", of: flow)
            #expect(queue.count == 2)
            #expect(queue.pop(where: { $0 != "waiter" }) == "\(flow)-1")
            queue.charge(flow, cost: 5)
        }
        #expect(queue.count == 1)
        #expect(queue.count(of: "waiter") == 1)
        #expect(queue.waitingFlows == ["waiter"])
        // Of the thousand flows that passed, only a few are remembered (each has used 5).
        let remembered = (1...1_000).filter { queue.virtualTime(of: "f\($0)") != 0 }.count
        #expect(remembered <= maximumFlows + 2)
        // The idle debtor was forgotten: it starts again at virtualNow.
        #expect(queue.virtualTime(of: "debtor") == 0)
        queue.append(1_001, "debtor1", of: "debtor")
        #expect(queue.virtualTime(of: "debtor") == queue.virtualNow)
        #expect(queue.pop(2) == ["waiter1", "debtor1"])
        #expect(queue.isEmpty)
    }

    @Test("removeAll gives every element in arrival order and leaves the queue empty")
    func removeAllInArrivalOrder() {
        let queue = Queue(estimate: 10)
        queue.append(5, "a1", of: "a")
        queue.append(7, "b1", of: "b")
        queue.append(9, "a2", of: "a")
        queue.append(12, "c1", of: "c")
        queue.append(13, "b2", of: "b")
        #expect(queue.remove(9)?.element == "a2")
        #expect(queue.removeAll() == ["a1", "b1", "c1", "b2"])
        #expect(queue.isEmpty)
        #expect(queue.count == 0)
        #expect(queue.waitingFlows.isEmpty)
        #expect(queue.count(of: "b") == 0)
        #expect(queue.pop() == nil)
        #expect(queue.removeAll().isEmpty)
    }
}
