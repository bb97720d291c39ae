import Postgres

/// The primary's log position as the standby checks sampled it, newest last, for a
/// standby's lag: how long ago the primary first stood past what the standby has replayed.
///
/// Measured on the primary's side, so a standby that receives nothing (its connection to the
/// primary cut) shows its lag growing, and an idle primary shows none. Bounded: samples
/// older than `span` are dropped, and a standby behind all of them is at least that far
/// behind.
struct PrimaryPositionHistory {
    private(set) var samples: [(at: ContinuousClock.Instant, position: WALPosition)] = []
    let span: Duration

    init(span: Duration) {
        self.span = span
    }

    mutating func record(_ position: WALPosition, at now: ContinuousClock.Instant) {
        self.samples.append((now, position))
        if let keep = self.samples.firstIndex(where: { now - $0.at <= self.span }), keep > 0 {
            self.samples.removeFirst(keep)
        }
    }

    /// How far behind the primary a standby that has replayed up to `replayed` is; nil when
    /// nothing is known of the primary yet.
    func lag(of replayed: WALPosition, now: ContinuousClock.Instant) -> Duration? {
        guard let newest = self.samples.last else { return nil }
        if replayed >= newest.position { return .zero }
        // The first sample past the standby: the primary stood there since (at least).
        guard let passed = self.samples.first(where: { $0.position > replayed }) else { return nil }
        return now - passed.at
    }
}
