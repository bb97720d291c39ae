import DequeModule

/// Waiting elements of several flows, taken out fairly across the flows (start-time fair
/// queuing): the next element is the head of the flow that has used the least so far, so a
/// flow that asks little is served ahead of one that floods, and flows that flood share
/// alike. A value with no locks and no clocks.
///
/// - Each flow has a *virtual time*: what it has used, in whatever unit `charge` is given
///   (the pool gives nanoseconds of holding a connection). Taking an element out charges its
///   flow `estimate` at once (so that several taken in a row before any of them ends do not
///   all look free); `charge` then corrects it by what the work really cost.
/// - A flow that starts waiting starts no earlier than `virtualNow`, the virtual time of the
///   last element taken out: a flow cannot bank what it did not use while idle.
/// - Ties go to the element that came first (ids grow in arrival order).
/// - At most `maximumFlows` flows are remembered: beyond it, flows with nothing waiting are
///   forgotten (their debt forgiven), so memory stays bounded however many flows pass.
public struct FairQueue<Flow: Hashable, Element> {
    private struct FlowState {
        var waiting: Deque<Int> = []
        var virtualTime: Int64 = 0
    }

    /// What taking an element out charges its flow before its real cost is known.
    public let estimate: Int64
    public let maximumFlows: Int
    private var flows: [Flow: FlowState] = [:]
    /// The flows with elements waiting: the ones `popNext` chooses from.
    public private(set) var waitingFlows: Set<Flow> = []
    private var elements: [Int: (flow: Flow, element: Element)] = [:]
    public private(set) var virtualNow: Int64 = 0

    public init(estimate: Int64, maximumFlows: Int) {
        self.estimate = estimate
        self.maximumFlows = maximumFlows
    }

    public var count: Int { self.elements.count }
    public var isEmpty: Bool { self.elements.isEmpty }

    /// How many elements of `flow` wait.
    public func count(of flow: Flow) -> Int { self.flows[flow]?.waiting.count ?? 0 }

    /// The virtual time of `flow` (for tests and metrics).
    public func virtualTime(of flow: Flow) -> Int64 { self.flows[flow]?.virtualTime ?? 0 }

    /// Adds `element` of `flow` as `id`, which must be greater than every id added before.
    public mutating func append(_ id: Int, _ element: Element, of flow: Flow) {
        var state = self.flows[flow] ?? FlowState()
        if state.waiting.isEmpty { state.virtualTime = max(state.virtualTime, self.virtualNow) }
        state.waiting.append(id)
        self.flows[flow] = state
        self.waitingFlows.insert(flow)
        self.elements[id] = (flow, element)
        self.forgetIdleFlowsIfMany()
    }

    /// Removes the element `id` (its waiter gave up); nil when it is not waiting.
    public mutating func remove(_ id: Int) -> (element: Element, flow: Flow)? {
        guard let (flow, element) = self.elements.removeValue(forKey: id) else { return nil }
        self.flows[flow]?.waiting.removeAll { $0 == id }
        if self.count(of: flow) == 0 { self.waitingFlows.remove(flow) }
        return (element, flow)
    }

    /// Takes out the next element: the head of the flow with the least virtual time among
    /// those `isEligible` accepts, which is charged `estimate`.
    public mutating func popNext(where isEligible: (Flow) -> Bool = { _ in true }) -> (id: Int, element: Element, flow: Flow)? {
        var next: (flow: Flow, virtualTime: Int64, head: Int)?
        for flow in self.waitingFlows where isEligible(flow) {
            guard let state = self.flows[flow], let head = state.waiting.first else { continue }
            if let best = next, (best.virtualTime, best.head) <= (state.virtualTime, head) { continue }
            next = (flow, state.virtualTime, head)
        }
        guard let next, let (_, element) = self.elements.removeValue(forKey: next.head) else { return nil }
        self.flows[next.flow]?.waiting.removeFirst()
        if self.count(of: next.flow) == 0 { self.waitingFlows.remove(next.flow) }
        self.virtualNow = max(self.virtualNow, next.virtualTime)
        self.flows[next.flow]?.virtualTime += self.estimate
        return (next.head, element, next.flow)
    }

    /// Work of `flow` that did not wait starts: charged `estimate`, as one taken out.
    public mutating func startWithoutWaiting(_ flow: Flow) {
        var state = self.flows[flow] ?? FlowState()
        state.virtualTime = max(state.virtualTime, self.virtualNow)
        self.virtualNow = state.virtualTime
        state.virtualTime += self.estimate
        self.flows[flow] = state
        self.forgetIdleFlowsIfMany()
    }

    /// Work of `flow` taken out earlier ended, having cost `cost`: its flow's virtual time is
    /// corrected from the `estimate` it was charged.
    public mutating func charge(_ flow: Flow, cost: Int64) {
        self.flows[flow]?.virtualTime += cost - self.estimate
    }

    /// Every element, in arrival order; the queue is empty afterwards.
    public mutating func removeAll() -> [Element] {
        let all = self.elements.sorted { $0.key < $1.key }.map(\.value.element)
        self.elements = [:]
        self.flows = [:]
        self.waitingFlows = []
        return all
    }

    private mutating func forgetIdleFlowsIfMany() {
        // Past the bound by the flows that wait (which are never forgotten), so that many
        // waiting flows do not make every append sweep.
        guard self.flows.count > self.maximumFlows + self.waitingFlows.count else { return }
        self.flows = self.flows.filter { !$0.value.waiting.isEmpty }
    }
}

extension FairQueue: Sendable where Flow: Sendable, Element: Sendable {}
