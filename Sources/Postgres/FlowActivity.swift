import DequeModule

/// Which flows are *active*: those with work under way (`begin` without its `end`), and those
/// whose last work ended less than `window` ago, so that a flow that asks for one thing at a
/// time counts between two of them. A value with no clocks: each event takes `now`.
///
/// Its size is the flows with work under way, those inside their window, and one entry for
/// each end of work within the last `window` (each expires with it).
struct FlowActivity<Flow: Hashable> {
    /// How long a flow stays active after its last work ended, in nanoseconds.
    let window: Int64
    /// Work under way, by flow.
    private var underWay: [Flow: Int] = [:]
    /// When each flow inside its window ended its last work.
    private var idleSince: [Flow: Int64] = [:]
    /// Flows that went idle, oldest first (an entry whose flow has worked since is skipped).
    private var wentIdle: Deque<(flow: Flow, at: Int64)> = []

    init(window: Int64) {
        self.window = window
    }

    /// Flows active at the last event.
    var count: Int { self.underWay.count + self.idleSince.count }

    /// Whether `flow` is active (at the last event).
    func isActive(_ flow: Flow) -> Bool { self.underWay[flow] != nil || self.idleSince[flow] != nil }

    /// Work of `flow` begins.
    mutating func begin(_ flow: Flow, now: Int64) {
        self.expire(now: now)
        self.idleSince[flow] = nil
        self.underWay[flow, default: 0] += 1
    }

    /// Work of `flow` ends.
    mutating func end(_ flow: Flow, now: Int64) {
        self.expire(now: now)
        guard let count = self.underWay[flow] else { return }
        if count > 1 {
            self.underWay[flow] = count - 1
            return
        }
        self.underWay[flow] = nil
        self.idleSince[flow] = now
        self.wentIdle.append((flow, now))
    }

    /// Flows idle for `window` are active no more.
    mutating func expire(now: Int64) {
        while let oldest = self.wentIdle.first, now - oldest.at >= self.window {
            self.wentIdle.removeFirst()
            if self.idleSince[oldest.flow] == oldest.at { self.idleSince[oldest.flow] = nil }
        }
    }
}

extension FlowActivity: Sendable where Flow: Sendable {}
