import CoreMetrics
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import Postgres
import ReceiptsStore
import ServiceLifecycle

/// Relays the event log to the streams of this process.
///
/// The hub looks at the log right after a write of this process commits (the store's
/// `committedWrites`), and when its `PostgresListener` subscription hears `NOTIFY
/// receipts_events`: from psql and other tools (their triggers notify), and from other
/// instances, which send one NOTIFY at a time for their writes, as this hub's
/// `PeerNotifier` does for its own while it knows another instance listens. It then reads
/// every tenant's new events once, in id order, through an `EventLogCursor` (which never
/// moves past an event that may still commit), keeps the most recent ones in memory for
/// tenants with open streams, and wakes their subscribers. A wait at a missing id lasts at
/// most `Options.abandonGapsAfter`: then the hub abandons the ids it waits for (a transaction
/// left open in psql must not hold every tenant's events back), and whoever holds one moves
/// its events after the others if it commits (sql/functions/events.sql).
/// A subscriber that is up to date is in live delivery: the hub writes each new event it may
/// see to its socket itself, encoded once, one hop to each event loop (`LiveSink`), and wakes
/// no task of the stream's. Any other subscriber pulls what is after its own position, from
/// memory or, when it is further behind, from the log, and goes live again once it caught up,
/// so a slow client never delays the others and memory stays bounded.
/// A subscriber that falls more than `maximumLag` events behind is closed with a reason; it
/// can resume from its last id.
///
/// Positions are of the database's current event history (`EventHistory`,
/// sql/functions/histories.sql), which every read of the log names. When a read names
/// another one (a failover or a restore), the hub follows it (`follow(_:)`): its cursor starts
/// again, and each subscriber goes on from its position, or from the newest one the new
/// history kept, with `resync.required` first when its client may hold events that were lost
/// (`Feed.follow(_:from:)`). The hub records its position about once a second
/// (`settleHistory()`), which is where a new history starts checking what it kept.
///
/// The hub is the shell that reads and waits; its decisions live in pure parts, each tested
/// alone: `EventLogFollower` (where it stands in the log: cursor, gaps, abandonment, history),
/// `EventFanOut` (the feeds and subscribers), and `PeerNotifier` beside it (waking other
/// instances). Credential notifications are not its business: `CredentialNotifications`
/// subscribes to them itself.
public final class EventHub: Service, Sendable {
    /// The channel the triggers notify.
    public static let channel = ReceiptsStore.eventChannel

    /// Tuning knobs.
    public struct Options: Sendable {
        /// Recent events kept in memory per tenant with subscribers.
        public var recentEvents: Int
        /// Most bytes those recent events may take per tenant (`LiveEvent.estimatedBytes`:
        /// the JSON and the audience). Default 16 MiB: the 10,000 events of a tenant of
        /// small chats (about 1 KiB each) fit as before, but an event may carry an audience
        /// of 10,000 members (some 400 KiB), and 10,000 of those would be gigabytes; then
        /// about 40 stay, and subscribers further behind read from the log, as they do past
        /// `recentEvents`. Memory for recent events is at most this per tenant with open streams.
        public var recentEventBytes: Int
        /// How far behind a subscriber may fall before it is closed.
        public var maximumLag: Int
        /// Events read from the log per query.
        public var pageSize: Int
        /// Whether to NOTIFY other instances after this process's writes (one at a time,
        /// coalescing what commits meanwhile, and only while another instance is heard).
        /// Needed when more than one instance serves the same database.
        public var notifiesOtherInstances: Bool
        /// How often this instance announces itself to the others (see `PeerInstances`).
        public var peerAnnouncementInterval: Duration
        /// How long the hub waits at a missing event id (a transaction took it and has not
        /// finished) before it abandons it: every tenant's live events wait behind such an id,
        /// so a transaction left open (in psql) must not hold them back for ever. If that
        /// transaction commits later, its events come after the others under new ids
        /// (sql/functions/events.sql), exactly once. Default 5 s: the service's own
        /// transactions end within the database timeout (default 5 s), so a longer wait is
        /// almost always someone else's open transaction, and 5 s stays well inside the 10 s a
        /// new stream waits for the hub to be ready; an abandoned id costs only the late
        /// writer's renumbering at its commit.
        public var abandonGapsAfter: Duration
        /// How often the hub records its position in the database while it moves (see
        /// `ReceiptsStore.settleEventHistory`): after a failover, the new history checks what it
        /// kept from the last position recorded on, so an event id that went unused in about
        /// this much time before the failover (a rollback) may cost clients past it a
        /// `resync.required` they did not need.
        public var historySettleInterval: Duration
        /// The most of each event loop's time, in percent, that live writes take while more wait
        /// than one go writes (`LiveWriteQueue`): the rest is left to requests and to what else
        /// runs on the machine. Default 80.
        public var fanOutLoopShare: Int

        public init(
            recentEvents: Int = 10_000, recentEventBytes: Int = 16 << 20, maximumLag: Int = 5_000, pageSize: Int = 500,
            notifiesOtherInstances: Bool = true, peerAnnouncementInterval: Duration = .seconds(5),
            abandonGapsAfter: Duration = .seconds(5), historySettleInterval: Duration = .seconds(1), fanOutLoopShare: Int = 80
        ) {
            self.recentEvents = recentEvents
            self.recentEventBytes = recentEventBytes
            self.maximumLag = maximumLag
            self.pageSize = pageSize
            self.notifiesOtherInstances = notifiesOtherInstances
            self.peerAnnouncementInterval = peerAnnouncementInterval
            self.abandonGapsAfter = abandonGapsAfter
            self.historySettleInterval = historySettleInterval
            self.fanOutLoopShare = fanOutLoopShare
        }
    }

    /// Why a subscription ended.
    public enum CloseReason: String, Sendable {
        case tooSlow = "the client fell too far behind; reconnect with the last id to resume"
        case shuttingDown = "the server is shutting down; reconnect with the last id to resume"
        case credentialEnded = "the credential expired or was revoked; reconnect with a valid one and the last id"
        /// Only for subscriptions that asked for it (webhook deliveries, which start again from
        /// their position in the database); streams go on (`Feed.follow(_:from:)`).
        case historyChanged = "the database went on to another event history (a failover); start again from the last position"
    }

    /// The hub's two jobs, under one lock: the feeds' memory starts where the cursor stands,
    /// so both move together.
    struct State {
        /// Where the hub stands in the log.
        var log: EventLogFollower
        /// The streams and what memory holds for them.
        var fanOut: EventFanOut
        /// What the follower has been asked to do since it last looked (`followLog`).
        var asked = FollowerRequests()
    }

    /// What `followLog` has been asked to do: read the log, or take the events writes of this
    /// process's runs of batches read right behind them (`CommittedEventsConsumer`).
    struct FollowerRequests {
        /// Whether the log must be read (a write that handed nothing over, a notification, a
        /// start, a wait at a gap).
        var read = false
        /// Events handed over by writes, with where each read began, oldest first.
        var handedOver: [(events: EventLogPage, readAfter: Int64)] = []
        /// Whether the follower waits for a request, with nothing to do: only then are writes
        /// asked to hand their events over (a busy follower reads the log for them anyway).
        var isIdle = true
    }

    /// The most events a read of the log behind a write takes; a read that fills it is not
    /// enough, and the log is read after it. Small: the read runs in the write's pipeline, and
    /// the writer's task takes it.
    static let handOverLimit = 32
    /// The most handovers waiting for the follower; past it they are dropped, and the log read.
    static let handOverBacklog = 16

    /// What one look at the log found.
    enum RefreshResult {
        /// Up to date with what is visible.
        case upToDate
        /// Waiting for running transactions (a gap may still fill): look again soon.
        case waiting
        /// The log could not be read: try again later.
        case failed
    }

    let store: ReceiptsStore
    let listener: PostgresListener
    let options: Options
    let logger: Logger
    let state: NIOLockedValueBox<State>
    /// Reports a gap that holds live events back for long (log line and metrics).
    private let stallWatch: EventStallWatch
    /// Wakes `followLog` (requests coalesce while it works): after this process's writes
    /// (`CommittedWrites`), notifications, and whoever waits for the hub to be ready. What it
    /// is asked to do is in `State.asked`.
    private let followerWakes: AsyncStream<Void>
    private let wakeFollower: AsyncStream<Void>.Continuation
    /// The listener's notifications on `channel`.
    private let notifications: AsyncStream<PostgresListener.Event>
    /// Nil when `Options.notifiesOtherInstances` is off.
    private let peerNotifier: PeerNotifier?
    /// `receipts_live_log_reads_total`: reads of the log by the follower.
    private let logReads: CoreMetrics.Counter
    /// `receipts_live_event_handovers_total{outcome}`: writes' own events taken as handed over
    /// (`taken`), or that left the log to be read (`read`).
    private let handoversTaken: CoreMetrics.Counter
    private let handoversRead: CoreMetrics.Counter

    /// Subscribes to `listener`'s notifications on `channel`: make the hub before the listener runs.
    ///
    /// - Parameter metrics: where the hub's metrics go (`receipts_live_events_*`); the global
    ///   `MetricsSystem` when nil.
    public init(
        store: ReceiptsStore, listener: PostgresListener, options: Options = Options(), logger: Logger,
        metrics: (any MetricsFactory)? = nil
    ) {
        self.store = store
        self.listener = listener
        self.options = options
        self.logger = logger
        let factory = metrics ?? MetricsSystem.factory
        self.stallWatch = EventStallWatch(logger: logger, factory: factory)
        self.logReads = Counter(label: "receipts_live_log_reads_total", factory: factory)
        self.handoversTaken = Counter(label: "receipts_live_event_handovers_total", dimensions: [("outcome", "taken")], factory: factory)
        self.handoversRead = Counter(label: "receipts_live_event_handovers_total", dimensions: [("outcome", "read")], factory: factory)
        self.state = NIOLockedValueBox(State(log: EventLogFollower(abandonGapsAfter: options.abandonGapsAfter), fanOut: EventFanOut(options: options)))
        (self.followerWakes, self.wakeFollower) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.notifications = listener.subscribe(to: Self.channel)
        self.peerNotifier =
            options.notifiesOtherInstances
            ? PeerNotifier(store: store, announcementInterval: options.peerAnnouncementInterval, logger: logger) : nil
    }

    /// Whether live events flow: the listener is connected and the hub knows its position.
    public var isLive: Bool {
        self.listener.isListening && self.state.withLockedValue { $0.log.ready != nil }
    }

    /// Relays notifications until graceful shutdown, then closes every stream.
    public func run() async throws {
        self.store.committedWrites.handEvents(to: self)
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.followLog() }
                group.addTask { await self.settleHistory() }
                group.addTask {
                    for await event in self.notifications {
                        switch event {
                        case .listening, .missed:
                            // Notifications may have been missed (a reconnect): read the log.
                            self.requestRefresh()
                            if case .listening = event { self.peerNotifier?.announce() }
                        case .notification(let notification) where notification.payload != self.peerNotifier?.payload:
                            self.requestRefresh()
                            self.peerNotifier?.heard(notification.payload)
                        case .notification:
                            break  // this instance's own
                        }
                    }
                }
                if let peerNotifier = self.peerNotifier {
                    group.addTask { await peerNotifier.run() }
                }
                self.requestRefresh()
                await group.next()
                group.cancelAll()
            }
        }
        self.closeAll(.shuttingDown)
    }

    /// Asks `followLog` to read the log.
    func requestRefresh() {
        self.state.withLockedValue { $0.asked.read = true }
        self.wakeFollower.yield()
    }

    /// Takes what writes handed over, and reads the log whenever asked (requests coalesce
    /// into one), or when a handover did not follow on from where the hub stands; again after
    /// a short pause while the cursor waits for running transactions (a rollback sends no
    /// notification), or the database cannot be reached. The pause starts at 1 ms and grows
    /// only while nothing moves (to 20 ms; 1 s while the log cannot be read).
    private func followLog() async {
        for await _ in self.followerWakes {
            let asked = self.state.withLockedValue { state in
                defer { state.asked = FollowerRequests(isIdle: false) }
                return state.asked
            }
            var mustRead = asked.read
            for handover in asked.handedOver {
                guard !mustRead else {
                    self.handoversRead.increment()
                    continue
                }
                mustRead = await !self.take(handover.events, handedOverAfter: handover.readAfter)
                (mustRead ? self.handoversRead : self.handoversTaken).increment()
            }
            var pause = Duration.milliseconds(1)
            while mustRead, !Task.isCancelled {
                let before = self.state.withLockedValue { $0.log.cursor?.position }
                let result = await self.refresh()
                if case .upToDate = result { break }
                let moved = before != self.state.withLockedValue { $0.log.cursor?.position }
                if moved { pause = .milliseconds(1) }
                try? await Task.sleep(for: pause)
                let longest: Duration = if case .failed = result { .seconds(1) } else { .milliseconds(20) }
                pause = min(pause * 2, longest)
            }
            // Writes that commit from here on may hand over again; what was asked meanwhile
            // has woken this loop once more.
            self.state.withLockedValue { $0.asked.isIdle = true }
        }
    }

    /// Takes the events read of the log right behind a write into the feeds, when they follow
    /// on from where the hub stands with no id missing and there can be none after them
    /// that the read left out; false when they do not (the log must be read).
    private func take(_ events: EventLogPage, handedOverAfter position: Int64) async -> Bool {
        let (history, alreadyPast) = self.state.withLockedValue { state in
            // A read the hub has gone past already (it read the log meanwhile): nothing to take.
            let past = state.log.cursor.map { $0.isReady && $0.position >= events.events.last?.id ?? position } ?? false
            return (state.log.history, past && state.log.isIn(events.history))
        }
        if alreadyPast { return events.events.count < Self.handOverLimit }
        guard let history else { return false }
        do {
            guard let cursor = try await self.take(events, readAfter: position, history: history, whole: true) else { return false }
            return cursor.position == events.events.last?.id ?? position && events.events.count < Self.handOverLimit
        } catch {
            return false
        }
    }

    // MARK: - Subscribing

    /// The hub has not settled where it stands in the log (it cannot read it, or waits for a
    /// transaction that may still commit a lower id), so a stream cannot start yet. The HTTP
    /// edge answers it 503 `unavailable` (`ErrorMiddleware`); the hub knows nothing of HTTP.
    public struct NotReady: Error {}

    /// Where a new stream starts.
    public struct Start: Sendable {
        let tenant: String
        let position: Int64
        /// The event history `position` is in (`EventHistory`).
        let history: String
        /// See `Subscriber.committedBefore`.
        let committedBefore: CommittedBefore?
        /// Set when the client's `after` was unknown, expired, or of a history the database
        /// lost: the `resync.required` to send first, carrying `position` (where the stream
        /// goes on from).
        let resync: Resync?
    }

    /// Resolves where a stream starts, before the handshake response is sent: after `after`
    /// when it is a position of this history (or an earlier one that this one kept) and the
    /// log still has everything after it; with `resync.required` and then everything after the
    /// newest position this history kept, when `after` is of a history the database lost (a
    /// failover); else with every event committed from now on, after `resync.required` when
    /// `after` was given (unknown, or expired).
    public func start(tenant: String, after: String?) async throws -> Start {
        let (current, history, log) = try await self.readyLogPosition(tenant: tenant)
        switch after.map(history.position(of:)) {
        case .position(let position) where log.canResume(after: position):
            return Start(tenant: tenant, position: position, history: history.currentId, committedBefore: nil, resync: nil)
        case .lost(let kept) where log.canResume(after: kept):
            // Of a history the database lost (a failover): resync.required, then everything
            // after the newest position it kept.
            return Start(
                tenant: tenant, position: kept, history: history.currentId, committedBefore: nil,
                resync: Resync(position: kept, eventId: history.eventId(kept)))
        default:
            break
        }
        return Start(
            tenant: tenant, position: current, history: history.currentId, committedBefore: CommittedBefore(snapshot: log.snapshot),
            resync: after == nil ? nil : Resync(position: current, eventId: history.eventId(current)))
    }

    /// The cursor's position once the hub has settled where it stands in the log (every
    /// event up to it has committed, or never will), and the histories it is of.
    func readyPosition() async throws -> (position: Int64, history: EventHistory) {
        // Longer than the hub waits at start for a transaction that may still commit a lower id.
        let deadline = ContinuousClock.now + max(.seconds(10), self.options.abandonGapsAfter + .seconds(2))
        while true {
            if let ready = self.state.withLockedValue({ $0.log.ready }) { return ready }
            guard ContinuousClock.now < deadline else {
                throw NotReady()
            }
            self.requestRefresh()
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Registers a stream, woken through `wake` (from the first pull on); events after `start`
    /// are delivered through the subscription. One that `closesOnHistoryChange` ends with
    /// `CloseReason.historyChanged` when the database goes on to another event history; any
    /// other goes on (`Feed.follow(_:from:)`).
    func subscribe(_ principal: Principal, from start: Start, closesOnHistoryChange: Bool = false, wake: SubscriberWake) -> EventSubscription {
        let key = self.state.withLockedValue { state in
            state.fanOut.subscribe(
                principal, from: start, closesOnHistoryChange: closesOnHistoryChange, wake: wake, history: state.log.history,
                cursor: state.log.cursor?.position)
        }
        wake.yield()
        return EventSubscription(hub: self, id: key.id, tenant: key.tenant, principal: principal, resync: start.resync)
    }

    /// Registers a stream whose task waits for its wake-ups on `wakeups` (see
    /// `subscribe(_:from:closesOnHistoryChange:wake:)`).
    func subscribe(
        _ principal: Principal, from start: Start, closesOnHistoryChange: Bool = false
    ) -> (subscription: EventSubscription, wakeups: AsyncStream<Void>) {
        let (wakeups, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let subscription = self.subscribe(principal, from: start, closesOnHistoryChange: closesOnHistoryChange, wake: SubscriberWake(wake))
        return (subscription, wakeups)
    }

    /// Closes one subscription (its stream ends with `reason`).
    func close(_ subscription: EventSubscription, _ reason: CloseReason) {
        let wake = self.state.withLockedValue { $0.fanOut.close(subscription.key, reason) }
        wake?.finish()
    }

    /// Puts a subscription that is up to date in live delivery: the hub writes its events to
    /// `sink` itself, and wakes it only when it must pull again (see `EventFanOut.goLive`).
    ///
    /// - Returns: whether it is live now.
    @discardableResult
    func goLive(_ subscription: EventSubscription, sink: LiveSink) -> Bool {
        self.state.withLockedValue { $0.fanOut.goLive(subscription.key, sink: sink) }
    }

    /// Whether the hub writes a subscription's events itself now (for tests).
    func isLive(_ subscription: EventSubscription) -> Bool {
        self.state.withLockedValue { $0.fanOut.feeds[subscription.tenant]?.subscribers[subscription.id]?.livePeriod != nil }
    }

    /// A live subscriber's socket could not take an event: it pulls from `position` on.
    func fellBehind(_ subscription: EventFanOut.Key, period: Int, at position: Int64) {
        let wake = self.state.withLockedValue { $0.fanOut.fellBehind(subscription, period: period, at: position) }
        wake?.yield()
    }

    func unsubscribe(_ subscription: EventSubscription) {
        self.state.withLockedValue { $0.fanOut.unsubscribe(subscription.key) }
    }

    /// The number of open streams (for tests and metrics).
    public var subscriberCount: Int {
        self.state.withLockedValue { $0.fanOut.subscriberCount }
    }

    // MARK: - Delivering

    /// The next events a subscription may see, oldest first.
    struct Batch {
        var events: [LiveEvent]
        /// Nothing more is there for the subscription right now.
        var isUpToDate: Bool
        /// Set when retention deleted events the subscription still needed, or its position
        /// was of a history the database lost: the `resync.required` to send (before
        /// `events`, which follow it).
        var resync: Resync? = nil
    }

    enum Pull {
        case events([LiveEvent], isUpToDate: Bool, committedBefore: CommittedBefore?)
        case fromLog(after: Int64, through: Int64, committedBefore: CommittedBefore?)
        case resync(at: Int64)
        /// The database went on to another event history and the hub does not know yet where
        /// it stands in it: nothing to send until it does (it wakes every subscriber then).
        case awaitingCursor
        case closed(CloseReason)
    }

    /// The next events for a subscription. Throws `CloseReason` when it was closed.
    func nextEvents(for subscription: EventSubscription) async throws -> Batch {
        let (pull, history) = self.state.withLockedValue { state in
            (state.fanOut.pull(for: subscription.key), state.log.history)
        }
        func shown(_ events: [LiveEvent], committedBefore: CommittedBefore?) -> [LiveEvent] {
            events.filter { event in
                event.isVisible(to: subscription.principal) && !(committedBefore?.excludes(event) ?? false)
            }
        }
        switch pull {
        case .closed(let reason):
            throw reason
        case .awaitingCursor:
            return Batch(events: [], isUpToDate: true)
        case .resync(let position):
            return Batch(events: [], isUpToDate: false, resync: history.map { Resync(position: position, eventId: $0.eventId(position)) })
        case .events(let events, let isUpToDate, let committedBefore):
            return Batch(events: shown(events, committedBefore: committedBefore), isUpToDate: isUpToDate)
        case .fromLog(let position, let through, let committedBefore):
            guard let history else { return Batch(events: [], isUpToDate: true) }
            let page = try await self.store.retainedEvents(
                tenant: subscription.tenant, after: position, through: through, limit: self.options.pageSize)
            guard page.history == history.currentId else {
                // Read after a failover the hub has not followed yet: the ids are of another
                // history. It follows at its next look, and wakes every subscriber then.
                self.requestRefresh()
                return Batch(events: [], isUpToDate: true)
            }
            if page.prunedThrough > position {
                // Retention deleted events after `position` while the subscription caught up:
                // it cannot have them all. As for an expired id at the start: resync.required
                // with the current id, then on from there (live, from memory).
                let current = self.state.withLockedValue { state -> Int64? in
                    guard let current = state.log.cursor?.position, state.log.isIn(history.currentId) else { return nil }
                    let restart = max(current, through)
                    return state.fanOut.move(subscription.key, from: position, to: restart, restarting: true) ? restart : nil
                }
                // (When it moved meanwhile, the next pull says where it is.)
                return Batch(events: [], isUpToDate: false, resync: current.map { Resync(position: $0, eventId: history.eventId($0)) })
            }
            let stored = page.events
            // The totals of its unread.changed, read before the subscription moves past these
            // events: a failed read leaves it where it was.
            var totals = UnreadTotalsOfPage()
            let sees = { (_: String, user: String) in subscription.principal.tokenUser.map { $0 == user } ?? true }
            try await totals.read(totals.missing(in: stored, isStreamed: sees), from: self.store)
            let reached = stored.count < self.options.pageSize ? through : stored[stored.count - 1].id
            let moved = self.state.withLockedValue { state in
                state.log.isIn(history.currentId) && state.fanOut.move(subscription.key, from: position, to: reached, restarting: false)
            }
            // Moved meanwhile (the database went on to another history, or the subscription
            // ended): the next pull says where it is.
            guard moved else { return Batch(events: [], isUpToDate: false) }
            return Batch(
                events: shown(stored.map { LiveEvent($0, history: history, totals: totals[$0]) }, committedBefore: committedBefore),
                isUpToDate: false)
        }
    }

    /// Reads every tenant's new events into the feeds and wakes their subscribers.
    func refresh() async -> RefreshResult {
        do {
            if self.state.withLockedValue({ $0.log.needsStart }) {
                let newest = try await self.store.newestEvent()
                if !self.state.withLockedValue({ $0.log.isIn(newest.history) }) {
                    // The first look, or the database went on to another history meanwhile.
                    self.follow(try await self.store.eventHistory())
                    return .waiting
                }
                // Asked after that read: whatever may still commit a lower id is among these.
                let writers = try await self.store.eventWriters()
                let started = self.state.withLockedValue {
                    $0.log.start(after: newest.id, in: newest.history, writers: writers, now: .now)
                }
                guard started else { return .waiting }
            }
            while true {
                let position = self.state.withLockedValue { state -> (from: Int64, history: EventHistory)? in
                    guard let cursor = state.log.cursor, let history = state.log.history else { return nil }
                    return (cursor.position, history)
                }
                guard let (from, history) = position else { return .failed }
                self.logReads.increment()
                let page = try await self.store.eventLog(after: from, limit: self.options.pageSize)
                if page.history != history.currentId {
                    // A failover (or a restore): the ids of this page are of another history.
                    self.follow(try await self.store.eventHistory())
                    return .waiting
                }
                guard let cursor = try await self.take(page, readAfter: from, history: history, whole: false) else { return .waiting }
                var writers: EventWriters?
                if cursor.needsRunningTransactions {
                    // Asked after the read: whatever may still fill the gap is among these.
                    let found = try await self.store.eventWriters()
                    if !found.hasWriterWithoutTransaction {
                        self.state.withLockedValue { $0.log.waitForGap(on: found.transactions) }
                    }
                    writers = found
                }
                self.stallWatch.observe(gap: cursor.gapStart, writers: writers)
                if cursor.isWaiting {
                    if await self.abandonOverdueWait() { continue }
                    return .waiting
                }
                if page.events.count < self.options.pageSize { return .upToDate }
            }
        } catch {
            // Before the first successful read, migrations may still be running (serve applies
            // them while services start): that is expected, and retried.
            let level: Logger.Level = self.state.withLockedValue { $0.log.needsStart } ? .debug : .error
            self.logger.log(level: level, "reading the event log failed", metadata: ["error": "\(error)"])
            return .failed
        }
    }

    /// Takes a read of the log into the feeds. The events before the first unread.changed that
    /// needs its user's totals go out at once, the rest once those are read: a sender's
    /// receipt.read does not wait for the reader's totals. Each part is taken as a read of its
    /// own, with the page's snapshot (the cursor looks at ids in order either way).
    ///
    /// - Parameter whole: take nothing of a part that does not follow on from where the
    ///   cursor stands with no id missing (`EventLogFollower.acceptWhole`): for events a write
    ///   handed over.
    /// - Returns: the cursor after it; nil when another refresh moved on meanwhile (or, with
    ///   `whole`, when a part did not follow on).
    private func take(_ page: EventLogPage, readAfter from: Int64, history: EventHistory, whole: Bool) async throws -> EventLogCursor? {
        let split = self.state.withLockedValue { state in
            UnreadTotalsOfPage.firstNeedingTotals(in: page.events, isStreamed: state.fanOut.isStreamed(_:user:))
        }
        var parts = [page.events[...]]
        if let split, split > 0 { parts = [page.events[..<split], page.events[split...]] }
        var cursor: EventLogCursor?
        var readAfter = from
        for part in parts {
            let read = EventLogPage(history: page.history, snapshot: page.snapshot, events: Array(part))
            cursor = try await self.append(read, readAfter: readAfter, history: history, whole: whole)
            // Stopped before the part's end (at a gap): the rest waits for the next read.
            guard let reached = cursor?.position, let last = part.last?.id, reached == last else { break }
            readAfter = reached
        }
        return cursor
    }

    /// Takes a read of the log into the feeds (`take`): JSON-encoded once, outside the
    /// lock, for the tenants that have streams, each `unread.changed` that a stream sees with
    /// its user's totals, read first (`UnreadTotalsOfPage`); then the subscribers it concerns
    /// are handed their events or woken.
    ///
    /// - Returns: the cursor after it; nil when another refresh moved on meanwhile.
    private func append(_ page: EventLogPage, readAfter from: Int64, history: EventHistory, whole: Bool) async throws -> EventLogCursor? {
        var totals = UnreadTotalsOfPage()
        var encoded: [Int64: LiveEvent] = [:]
        var deliveries = LiveDeliveries()
        var appended: (wakes: [SubscriberWake], cursor: EventLogCursor?)?
        for attempt in 1...3 {
            let (streamed, missing) = self.state.withLockedValue { state in
                (Set(page.events.lazy.map(\.tenantId).filter(state.fanOut.isStreamed)),
                 totals.missing(in: page.events, isStreamed: state.fanOut.isStreamed(_:user:)))
            }
            try await totals.read(missing, from: self.store)
            for event in page.events where streamed.contains(event.tenantId) && encoded[event.id]?.hasTotals != true {
                encoded[event.id] = LiveEvent(event, history: history, totals: totals[event])
            }
            appended = self.state.withLockedValue { state -> (wakes: [SubscriberWake], cursor: EventLogCursor?)? in
                // A stream that came meanwhile and sees a user whose totals were not read:
                // read them too, before anything is appended (at most twice more).
                if attempt < 3, !totals.missing(in: page.events, isStreamed: state.fanOut.isStreamed(_:user:)).isEmpty {
                    return nil
                }
                // Another refresh (tests call it directly) may have moved on meanwhile.
                let accepting = whole ? state.log.acceptWhole(page, readAfter: from) : state.log.accept(page, readAfter: from)
                guard let (accepted, cursor) = accepting else { return ([], nil) }
                // Settled in the history the database went on to: the feeds serve again from
                // where the cursor began in it.
                let resumed = cursor.isReady ? state.fanOut.resume(from: from) : []
                return (resumed + state.fanOut.append(accepted, encoded: encoded, history: history, deliveries: &deliveries), cursor)
            }
            if appended != nil { break }
        }
        // After the lock, and before any stream woken now can write: a live subscriber's
        // events reach its event loop in order, ahead of its close.
        deliveries.send(loopShare: self.options.fanOutLoopShare) { [weak self] subscriber, period, position in
            self?.fellBehind(subscriber, period: period, at: position)
        }
        for wake in appended?.wakes ?? [] { wake.yield() }
        return appended?.cursor
    }

    /// Ends a wait at a missing event id that has lasted `Options.abandonGapsAfter`
    /// (`EventLogFollower.overdueWait(at:)`): abandons the missing ids up to the newest id seen
    /// (`ReceiptsStore.abandonEventIds`), which the cursor steps over in its next read. A call
    /// that fails (a writer ran its commit-time check early and holds the lock: see
    /// sql/functions/events.sql) leaves the cursor waiting, as before; the next attempt comes
    /// after another deadline, as after an abandonment that did not end the wait.
    ///
    /// - Returns: whether ids were abandoned (then read again at once).
    private func abandonOverdueWait() async -> Bool {
        guard let due = self.state.withLockedValue({ $0.log.overdueWait(at: .now) }) else { return false }
        do {
            let abandoned = try await self.store.abandonEventIds(through: due.target)
            self.state.withLockedValue { $0.log.abandoned(through: abandoned.horizon, transaction: abandoned.transaction) }
            self.stallWatch.abandoned(at: due.gap, through: abandoned.horizon, waited: due.waited)
            return true
        } catch {
            self.logger.warning("abandoning missing event ids failed: live events keep waiting", metadata: ["error": "\(error)"])
            return false
        }
    }

    private func closeAll(_ reason: CloseReason) {
        let wakes = self.state.withLockedValue { $0.fanOut.closeAll(reason) }
        for wake in wakes { wake.finish() }
    }
}

extension EventHub.CloseReason: Error {}

/// The reads of the log made right behind this process's writes, taken without a read
/// of the log (`CommittedWrites`, `ReceiptsStore.runBatches`).
extension EventHub: CommittedEventsConsumer {
    public func eventsToHandOver() -> (after: Int64, limit: Int)? {
        self.state.withLockedValue { state in
            guard state.asked.isIdle, !state.asked.read, state.asked.handedOver.isEmpty,
                let cursor = state.log.cursor, cursor.isReady, !cursor.isWaiting, state.log.history != nil
            else { return nil }
            return (cursor.position, Self.handOverLimit)
        }
    }

    public func writeCommitted() {
        self.requestRefresh()
    }

    /// Takes the events right here, in the writer's task, when the follower has nothing else
    /// to do (one hop fewer: no task of the hub's is woken); else leaves them to the follower.
    /// Either way, one that does not follow on has the follower read the log.
    public func writeCommitted(handingOver events: EventLogPage, readAfter position: Int64) async {
        let takeHere = self.state.withLockedValue { state -> Bool in
            if state.asked.isIdle, !state.asked.read, state.asked.handedOver.isEmpty {
                state.asked.isIdle = false
                return true
            }
            if state.asked.handedOver.count < Self.handOverBacklog {
                state.asked.handedOver.append((events, position))
            } else {
                state.asked.read = true
            }
            return false
        }
        guard takeHere else {
            self.wakeFollower.yield()
            return
        }
        let taken = await self.take(events, handedOverAfter: position)
        (taken ? self.handoversTaken : self.handoversRead).increment()
        let wake = self.state.withLockedValue { state -> Bool in
            state.asked.isIdle = true
            if !taken { state.asked.read = true }
            return state.asked.read || !state.asked.handedOver.isEmpty
        }
        if wake { self.wakeFollower.yield() }
    }
}
