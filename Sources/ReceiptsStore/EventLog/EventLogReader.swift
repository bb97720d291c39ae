import CoreMetrics
import Logging
import NIOConcurrencyHelpers

/// What the reader of the event log keeps in step with where it stands (the event hub's
/// feeds and subscribers): memory of events that starts where the reader's cursor stands, so
/// both change under one lock (`EventLogReader.withMirror(_:)`, `take(_:if:append:)`).
public protocol EventLogMirror: Sendable {
    /// What the mirror's owner does after a change, outside the lock (wake a subscriber, …).
    associatedtype Effect: Sendable

    /// The database went on to another event history (a failover or a restore): the reader's
    /// cursor starts again, and positions are of `history` from now on.
    ///
    /// - Returns: what to do after it, outside the lock (`EventLogReader`'s `perform`).
    mutating func follow(_ history: EventHistory, from previous: String) -> [Effect]
}

/// How a look at the log ended.
public enum EventLogReadResult: Sendable {
    /// Up to date with what is visible.
    case upToDate
    /// Waiting for running transactions (a gap may still fill): look again soon.
    case waiting
    /// The log could not be read (or a read could not be taken): try again later.
    case failed
}

/// The event log, read in id order for the processes that relay it: every tenant's events
/// once, as ordered, gap-free reads (`EventLogRead`), a sequence that its one consumer takes
/// into its `Mirror` (`take(_:if:append:)`) before it asks for the next.
///
/// The reader owns the log's protocol: where it stands (`EventLogFollower`: the cursor that
/// never moves past an event that may still commit, the event history its positions are in),
/// which transactions a gap waits for (`ReceiptsStore.eventWriters`), abandoning ids that a
/// transaction left open holds back for longer than `Options.abandonGapsAfter`, following the
/// database to another history after a failover (the mirror follows in the same step), and
/// recording its position about once a second (`settleHistory()`).
///
/// A look at the log is asked for by `requestRead()` (a notification, a write of this process
/// that read nothing behind it, a wait). Writes of this process may also hand over the read of
/// the log made right behind them (`handOver(_:readAfter:)`): when the reader has nothing else
/// to do, the writer's task takes it itself (no task of the reader's is woken); else the
/// sequence yields it in turn, and one that does not follow on has the log read.
///
/// Iterate it from one task only: the sequence reads the log as it is iterated.
public final class EventLogReader<Mirror: EventLogMirror>: AsyncSequence, Sendable {
    public typealias Element = EventLogRead

    /// Tuning knobs (`EventHub.Options` sets them).
    public struct Options: Sendable {
        /// Events read per query.
        public var pageSize: Int
        /// How long the reader waits at a missing event id before it abandons it.
        public var abandonGapsAfter: Duration
        /// How often the reader records its position while it moves (`settleHistory()`).
        public var historySettleInterval: Duration

        public init(pageSize: Int = 500, abandonGapsAfter: Duration = .seconds(5), historySettleInterval: Duration = .seconds(1)) {
            self.pageSize = pageSize
            self.abandonGapsAfter = abandonGapsAfter
            self.historySettleInterval = historySettleInterval
        }
    }

    /// Where the reader stands, as its mirror's owner sees it under the lock.
    public struct Standing: Sendable {
        /// Every event up to here has been taken, or never will be visible; nil before the
        /// first look at the log, and after a failover until the next one.
        public let position: Int64?
        /// Whether `position` is settled: no transaction that may still commit a lower id runs.
        public let isReady: Bool
        /// The histories that led to the one `position` is in (nil before the first look).
        public let history: EventHistory?

        /// `position` and `history`, once settled.
        public var ready: (position: Int64, history: EventHistory)? {
            guard let position, self.isReady, let history else { return nil }
            return (position, history)
        }

        /// Whether `historyId` is the history `position` is in.
        public func isIn(_ historyId: String) -> Bool { self.history?.currentId == historyId }

        init(_ log: EventLogFollower) {
            self.position = log.cursor?.position
            self.isReady = log.cursor?.isReady ?? false
            self.history = log.history
        }
    }

    /// The reader and its mirror, under one lock.
    struct State {
        var log: EventLogFollower
        var mirror: Mirror
        var asked = Requests()
        /// Numbers reads; the last one that was taken (`take(_:if:append:)`).
        var reads: UInt64 = 0
        var lastTaken: UInt64 = 0
    }

    /// What the reader has been asked to do since it last looked.
    struct Requests {
        /// Whether the log must be read (a write that handed nothing over, a notification, a
        /// start, a wait at a gap).
        var read = false
        /// Reads of the log handed over by writes, oldest first.
        var handedOver: [EventLogRead] = []
        /// Whether the sequence waits for a request, with nothing to do: only then are writes
        /// asked to hand their reads over (a busy reader reads the log for them anyway), and
        /// only then does a writer take its own.
        var isIdle = true
    }

    /// The most events a read of the log behind a write takes; a read that fills it is not
    /// enough, and the log is read after it. Small: the read runs in the write's pipeline, and
    /// the writer's task takes it.
    public static var handOverLimit: Int { 32 }
    /// The most handovers waiting for the sequence; past it they are dropped, and the log read.
    static var handOverBacklog: Int { 16 }

    let store: ReceiptsStore
    let options: Options
    let logger: Logger
    let state: NIOLockedValueBox<State>
    /// Reports a gap that holds events back for long (log line and metrics).
    let stallWatch: EventStallWatch
    /// Wakes the sequence (requests coalesce while its consumer works).
    let wakes: AsyncStream<Void>
    let wake: AsyncStream<Void>.Continuation
    /// `receipts_live_log_reads_total`: reads of the log.
    let logReads: CoreMetrics.Counter
    /// `receipts_live_event_handovers_total{outcome}`: writes' reads taken as handed over
    /// (`taken`), or that left the log to be read (`read`).
    let handoversTaken: CoreMetrics.Counter
    let handoversRead: CoreMetrics.Counter
    /// Carries out what the mirror returns from `follow(_:from:)`, outside the lock.
    let perform: @Sendable ([Mirror.Effect]) -> Void

    /// - Parameter perform: carries out what the mirror returns from
    ///   `EventLogMirror.follow(_:from:)`, outside the lock.
    public init(
        store: ReceiptsStore, mirror: Mirror, perform: @escaping @Sendable ([Mirror.Effect]) -> Void, options: Options, logger: Logger,
        metrics factory: any MetricsFactory
    ) {
        self.store = store
        self.perform = perform
        self.options = options
        self.logger = logger
        self.state = NIOLockedValueBox(State(log: EventLogFollower(abandonGapsAfter: options.abandonGapsAfter), mirror: mirror))
        self.stallWatch = EventStallWatch(logger: logger, factory: factory)
        (self.wakes, self.wake) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.logReads = Counter(label: "receipts_live_log_reads_total", factory: factory)
        self.handoversTaken = Counter(label: "receipts_live_event_handovers_total", dimensions: [("outcome", "taken")], factory: factory)
        self.handoversRead = Counter(label: "receipts_live_event_handovers_total", dimensions: [("outcome", "read")], factory: factory)
    }

    /// Runs `body` with the mirror and where the reader stands, under the lock. Do not call
    /// into the reader from `body`.
    public func withMirror<T>(_ body: (inout Mirror, Standing) -> T) -> T {
        self.state.withLockedValue { state in body(&state.mirror, Standing(state.log)) }
    }

    /// Where the reader stands now.
    public var standing: Standing { self.state.withLockedValue { Standing($0.log) } }

    /// Asks the sequence to read the log.
    public func requestRead() {
        self.state.withLockedValue { $0.asked.read = true }
        self.wake.yield()
    }

    /// What `take(_:if:append:)` did.
    public enum Taking<T> {
        /// `prepare` declined: nothing was taken.
        case declined
        /// The read was of no more use (another read moved on meanwhile, it is of another
        /// history, or a handover did not follow on): nothing was taken.
        case stale
        /// The events the cursor could accept were handed to `append`, which made this.
        case taken(T)
    }

    /// Takes `read` into the mirror, under the lock: `prepare` looks at the mirror first and
    /// may decline; then the cursor accepts the read's events as far as it may go (to a gap,
    /// it waits there), and `append` gets them, in id order, with where the reader stands
    /// after them. A handover is taken only whole (`EventLogFollower.acceptWhole`).
    public func take<T>(
        _ read: EventLogRead, if prepare: (Mirror) -> Bool = { _ in true },
        append: (inout Mirror, _ accepted: [StoredEvent], Standing) -> T
    ) -> Taking<T> {
        self.state.withLockedValue { state in
            guard prepare(state.mirror) else { return .declined }
            let accepting =
                read.isHandover ? state.log.acceptWhole(read.page, readAfter: read.after) : state.log.accept(read.page, readAfter: read.after)
            guard let (accepted, _) = accepting else { return .stale }
            state.lastTaken = read.serial
            return .taken(append(&state.mirror, accepted, Standing(state.log)))
        }
    }

    /// A read of the log after `after`, numbered.
    func newRead(_ page: EventLogPage, after: Int64, history: EventHistory, isHandover: Bool, in state: inout State) -> EventLogRead {
        state.reads += 1
        return EventLogRead(page: page, after: after, history: history, isHandover: isHandover, serial: state.reads)
    }

    /// Takes `history` (the lineage the database reports now). After the first look, that
    /// means the database went on to another history (a failover or a restore): the cursor
    /// starts again as at start, and the mirror follows in the same step.
    func follow(_ history: EventHistory) {
        let followed = self.state.withLockedValue { state -> (previous: EventHistory, effects: [Mirror.Effect])? in
            guard let previous = state.log.follow(history) else { return nil }
            return (previous, state.mirror.follow(history, from: previous.currentId))
        }
        guard let (previous, effects) = followed else { return }
        self.perform(effects)
        let segment = history.segments[history.segments.count - 1]
        self.logger.warning(
            "the database went on to another event history (a failover or a restore): streams resume where it kept their position, and get resync.required where it did not",
            metadata: [
                "history": "\(segment.id)", "previous": "\(previous.currentId)", "resumableThrough": "\(segment.resumableThrough)",
                "startedAfter": "\(segment.startedAfter)",
            ])
    }
}

/// A read of the event log, not taken yet (`EventLogReader.take(_:if:append:)`).
public struct EventLogRead: Sendable {
    /// What was read: events after `after`, in id order.
    public let page: EventLogPage
    /// Where the read began.
    public let after: Int64
    /// The histories the reader followed when it asked for the read.
    public let history: EventHistory
    /// A read made right behind a write of this process: taken only whole.
    public let isHandover: Bool
    let serial: UInt64

    /// The events of `range`, as a read after `position` (the part of this read that follows
    /// on from where an earlier part was taken).
    public func part(_ range: Range<Int>, after position: Int64) -> EventLogRead {
        let page = EventLogPage(history: self.page.history, snapshot: self.page.snapshot, events: Array(self.page.events[range]))
        return EventLogRead(page: page, after: position, history: self.history, isHandover: self.isHandover, serial: self.serial)
    }
}

/// The reader has not settled where it stands in the log (it cannot read it, or waits for a
/// transaction that may still commit a lower id). The HTTP edge answers 503 `unavailable`.
public struct EventLogNotReady: Error {}
