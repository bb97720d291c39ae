import CoreMetrics
import Logging
import NIOConcurrencyHelpers

/// Makes a stalled event log visible: while the event log reader's cursor waits at a missing event id
/// (a transaction that took the id is still open), every tenant's live events wait behind it.
/// A wait is normally a commit or two long; one longer than `threshold` is logged once, at
/// warning, with the pids of the transactions it waits for (`pg_stat_activity` tells who they
/// are; `pg_terminate_backend` ends one), and again when events move on.
///
/// Metrics (no labels): `receipts_live_events_stall_seconds`, how long the current wait has
/// lasted (0 when none); `receipts_live_events_stalls_total`, waits that passed `threshold`;
/// `receipts_live_events_gaps_abandoned_total`, waits the reader ended at its deadline by
/// abandoning the missing ids (`EventLogReader.Options.abandonGapsAfter`), each logged at warning.
final class EventStallWatch: Sendable {
    static let threshold = Duration.seconds(1)

    private struct Stall {
        let gapStart: Int64
        let since: ContinuousClock.Instant
        var pids: [Int32]
        var reported: Bool
    }

    private let logger: Logger
    private let stalled: NIOLockedValueBox<Stall?> = NIOLockedValueBox(nil)
    private let waitGauge: CoreMetrics.Gauge
    private let stalls: CoreMetrics.Counter
    private let abandonments: CoreMetrics.Counter

    init(logger: Logger, factory: any MetricsFactory) {
        self.logger = logger
        self.waitGauge = Gauge(label: "receipts_live_events_stall_seconds", factory: factory)
        self.stalls = Counter(label: "receipts_live_events_stalls_total", factory: factory)
        self.abandonments = Counter(label: "receipts_live_events_gaps_abandoned_total", factory: factory)
        self.waitGauge.record(0)
    }

    /// After each look at the log: where the cursor waits (nil when it does not), and the
    /// writers it was told to wait for, when it asked.
    func observe(gap: Int64?, writers: EventWriters?) {
        let now = ContinuousClock.now
        enum Report {
            case stalled(Stall, waited: Duration)
            case resumed(Stall, waited: Duration)
        }
        let report = self.stalled.withLockedValue { stalled -> Report? in
            guard let gap else {
                defer { stalled = nil }
                if let stall = stalled, stall.reported { return .resumed(stall, waited: now - stall.since) }
                return nil
            }
            if stalled?.gapStart != gap {
                let finished = stalled.flatMap { $0.reported ? Report.resumed($0, waited: now - $0.since) : nil }
                stalled = Stall(gapStart: gap, since: now, pids: writers?.pids ?? [], reported: false)
                return finished
            }
            if let writers { stalled?.pids = writers.pids }
            guard let stall = stalled, !stall.reported, now - stall.since >= Self.threshold else { return nil }
            stalled?.reported = true
            return .stalled(stall, waited: now - stall.since)
        }
        let waited = self.stalled.withLockedValue { $0.map { now - $0.since } } ?? .zero
        self.waitGauge.record(Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18)
        switch report {
        case .stalled(let stall, let waited):
            self.stalls.increment()
            self.logger.warning(
                "live events are held back: a transaction that took an event id has not finished",
                metadata: [
                    "receipts.event_id": "\(stall.gapStart)", "receipts.waited_ms": "\(waited.milliseconds)",
                    "receipts.blocking_pids": "\(stall.pids.map(String.init).joined(separator: ","))",
                ])
        case .resumed(let stall, let waited):
            self.logger.notice(
                "live events move again", metadata: ["receipts.event_id": "\(stall.gapStart)", "receipts.waited_ms": "\(waited.milliseconds)"])
        case nil:
            break
        }
    }
}

extension EventStallWatch {
    /// The reader stopped waiting at `gap` (nil: for its start to settle): missing ids up to
    /// `horizon` are abandoned, and whoever holds one moves its events after them if it commits.
    func abandoned(at gap: Int64?, through horizon: Int64, waited: Duration) {
        self.abandonments.increment()
        let pids = self.stalled.withLockedValue { $0?.pids ?? [] }
        self.logger.warning(
            "live events stopped waiting for a transaction that took an event id: if it commits, its events come later under new ids",
            metadata: [
                "receipts.event_id": "\(gap.map(String.init) ?? "")", "receipts.abandoned_through": "\(horizon)",
                "receipts.waited_ms": "\(waited.milliseconds)",
                "receipts.blocking_pids": "\(pids.map(String.init).joined(separator: ","))",
            ])
    }
}

extension Duration {
    var milliseconds: Int64 { self.components.seconds * 1_000 + self.components.attoseconds / 1_000_000_000_000_000 }
}
