import Synchronization

/// The open HTTP connections (streams included) counted against the cap
/// (`ReceiptsConfiguration.maximumConnections`), so that the process never reaches its
/// open-file limit: past it, a failed `accept` can take the whole process down (libdispatch
/// aborts when it cannot open a file), and every stream with it.
///
/// A connection past the cap is still accepted, but into a small spill-over of its own
/// (`spillOver`): it is read for one request head and answered at once, `/healthz` with 200
/// and anything else with 503 (`OverCapResponder`), then closed. Past the spill-over too, a
/// connection is closed as soon as it is accepted. Either way the connections already open
/// keep being served.
final class ConnectionSlots: Sendable {
    /// What a new connection gets.
    enum Admission: Sendable {
        /// Served as usual.
        case admitted
        /// Answered at once (`OverCapResponder`), then closed.
        case answeredOverCap
        /// Closed as soon as it was accepted.
        case closed
    }

    /// Most connections served at once.
    let maximum: Int
    /// Most connections past `maximum` answered at once (`Admission.answeredOverCap`).
    let spillOver: Int
    private let open = Atomic<Int>(0)
    private let overCap = Atomic<Int>(0)
    /// When a refusal was last logged (`NIODeadline` uptime nanoseconds), so that a flood of
    /// connections logs one line every `warningInterval`, not one each.
    private let lastWarning = Atomic<UInt64>(0)
    static let warningInterval: UInt64 = 10_000_000_000

    init(maximum: Int, spillOver: Int) {
        precondition(maximum >= 1 && spillOver >= 0)
        self.maximum = maximum
        self.spillOver = spillOver
    }

    /// The spill-over for a cap of `maximum`: enough for health checks and prompt refusals,
    /// small beside the reserve of files the cap leaves (`ConnectionCap`).
    static func spillOver(forMaximum maximum: Int) -> Int {
        min(64, max(4, maximum / 64))
    }

    /// The connections being served now (not those answered over the cap).
    var openConnections: Int { min(self.maximum, self.open.load(ordering: .relaxed)) }

    /// Takes a place for a new connection; `release(_:)` gives it back when the connection closes.
    func admit() -> Admission {
        if self.open.add(1, ordering: .relaxed).newValue <= self.maximum { return .admitted }
        self.open.subtract(1, ordering: .relaxed)
        if self.overCap.add(1, ordering: .relaxed).newValue <= self.spillOver { return .answeredOverCap }
        self.overCap.subtract(1, ordering: .relaxed)
        return .closed
    }

    /// Gives back the place `admission` took.
    func release(_ admission: Admission) {
        switch admission {
        case .admitted: self.open.subtract(1, ordering: .relaxed)
        case .answeredOverCap: self.overCap.subtract(1, ordering: .relaxed)
        case .closed: break
        }
    }

    /// Whether a refusal at `now` (uptime nanoseconds) should be logged: the first one, and
    /// then at most one each `warningInterval`.
    func shouldLogRefusal(now: UInt64) -> Bool {
        let last = self.lastWarning.load(ordering: .relaxed)
        guard last == 0 || now &- last >= Self.warningInterval else { return false }
        return self.lastWarning.compareExchange(expected: last, desired: max(now, 1), ordering: .relaxed).exchanged
    }

    /// The connections served now.
    var openCount: Int { self.open.load(ordering: .relaxed) }
}
