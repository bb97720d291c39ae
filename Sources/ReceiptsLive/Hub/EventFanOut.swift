import ReceiptsCore
import ReceiptsStore

/// The event hub's fan-out: for each tenant with open streams a feed of its recent events
/// (`EventHub.Feed`), and each subscriber's place in it (`EventHub.Subscriber`).
///
/// Events are appended once per tenant, however many streams it has. A subscriber that is up
/// to date goes live (`goLive`): appending an event gathers its write for the hub to hand to
/// the subscriber's socket (`LiveDeliveries`), found through the feed's `LiveRoutes` without
/// looking at the other subscribers, and wakes it for none. Every other subscriber pulls
/// what comes after its own position, from memory, or is told where to read the log when it
/// is further behind than memory reaches, so a slow client never delays the others and memory
/// stays bounded (`EventHub.Options.recentEvents`, `recentEventBytes`). One that falls
/// `maximumLag` behind is closed with a reason. No I/O, and no continuation of the shell's:
/// the store's `EventLogReader` holds this as its mirror, under the lock that moves its
/// cursor; the hub keeps each subscriber's `SubscriberWake` by its key (`SubscriberWakeUps`)
/// and performs the `Wake`s this returns, outside the lock.
struct EventFanOut: EventLogMirror {
    /// A subscriber: its tenant's feed, and its id there.
    struct Key: Hashable, Sendable {
        let tenant: String
        let id: Int
    }

    /// What the hub does for a subscriber after a change, outside its lock.
    enum Wake: Hashable, Sendable {
        /// Something may be new for it: it pulls.
        case pull(Key)
        /// It was closed: its wake-ups end, and its next pull throws the reason.
        case close(Key)
    }

    let options: EventHub.Options
    private(set) var feeds: [String: EventHub.Feed] = [:]
    private var nextSubscriberId = 0
    private var nextLivePeriod = 0
    private(set) var isShuttingDown = false
    /// Set when the database went on to another event history: the feeds serve nothing
    /// until the hub knows where it stands in it (`resume(from:)`).
    private(set) var awaitsCursor = false

    init(options: EventHub.Options) {
        self.options = options
    }

    /// The number of open streams.
    var subscriberCount: Int { self.feeds.values.reduce(0) { $0 + $1.subscribers.count } }

    /// Registers a subscriber starting at `start`, while the hub's cursor is at `cursor` in
    /// `history` (nil before its first look at the log).
    ///
    /// - Returns: the subscriber's key, and its first wake-ups: a pull, after its close when
    ///   it is closed at once (the database went on to another history and it closes on that,
    ///   or the hub shuts down).
    mutating func subscribe(
        _ principal: Principal, from start: EventHub.Start, closesOnHistoryChange: Bool, history: EventHistory?, cursor: Int64?
    ) -> (key: Key, wakes: [Wake]) {
        let key = Key(tenant: start.tenant, id: self.nextSubscriberId)
        self.nextSubscriberId += 1
        var subscriber = EventHub.Subscriber(
            principal: principal, position: start.position, startedAt: start.position, committedBefore: start.committedBefore,
            closeReason: nil, closesOnHistoryChange: closesOnHistoryChange)
        if let history, history.currentId != start.history, closesOnHistoryChange {
            subscriber.closeReason = .historyChanged
        } else if let history, history.currentId != start.history {
            // The database went on to another history since `start` was resolved: as for
            // the streams open through it (`Feed.follow(_:from:)`).
            subscriber.follow(history, from: start.history) { kept in start.position > kept }
            if subscriber.pendingResync == .atCursor, !self.awaitsCursor, let cursor {
                (subscriber.position, subscriber.startedAt, subscriber.pendingResync) = (cursor, cursor, .atPosition)
            }
        }
        let closedAtOnce = subscriber.closeReason != nil || self.isShuttingDown
        self.feeds[start.tenant, default: EventHub.Feed(tenant: start.tenant, coveredFrom: cursor ?? start.position)].subscribers[key.id] =
            subscriber
        self.feeds[start.tenant]!.viewers.insert(principal.tokenUser)
        return (key, closedAtOnce ? [.close(key), .pull(key)] : [.pull(key)])
    }

    /// Marks a subscriber closed for `reason`; its wake-ups are to end (nil when it is gone).
    mutating func close(_ subscription: Key, _ reason: EventHub.CloseReason) -> Wake? {
        guard self.feeds[subscription.tenant]?.subscribers[subscription.id] != nil else { return nil }
        // No more writes of its own: those already handed to its event loop go before the
        // stream's close.
        self.feeds[subscription.tenant]!.leaveLive(subscription.id)
        self.feeds[subscription.tenant]!.subscribers[subscription.id]!.closeReason = reason
        return .close(subscription)
    }

    /// How far a subscriber has been given events (or skipped those not for it).
    func position(of subscription: Key) -> Int64? {
        self.feeds[subscription.tenant]?.subscribers[subscription.id]?.position
    }

    /// Forgets a subscriber, and its tenant's feed with its last one.
    mutating func unsubscribe(_ subscription: Key) {
        self.feeds[subscription.tenant]?.leaveLive(subscription.id)
        if let removed = self.feeds[subscription.tenant]?.subscribers.removeValue(forKey: subscription.id) {
            self.feeds[subscription.tenant]!.viewers.remove(removed.principal.tokenUser)
        }
        if self.feeds[subscription.tenant]?.subscribers.isEmpty == true {
            self.feeds[subscription.tenant] = nil
        }
    }

    /// What a subscriber gets next: events held in memory (its position moves past them),
    /// where to read the log, a `resync.required`, or nothing while the hub finds where it
    /// stands in a new history.
    mutating func pull(for subscription: Key) -> EventHub.Pull {
        if self.awaitsCursor && !self.isShuttingDown {
            // A subscription closed meanwhile learns why at once (a webhook's starts again).
            guard let subscriber = self.feeds[subscription.tenant]?.subscribers[subscription.id] else { return .closed(.shuttingDown) }
            return subscriber.closeReason.map(EventHub.Pull.closed) ?? .awaitingCursor
        }
        // In place: a copy of the feed would copy its table of subscribers on the write,
        // once per subscriber woken, which made a fan-out quadratic in its subscribers.
        return self.feeds[subscription.tenant]?.pull(for: subscription.id, pageSize: self.options.pageSize) ?? .closed(.shuttingDown)
    }

    /// Moves a subscriber that read the log after `position` on to `newPosition` (and, when
    /// `restarting`, takes that as where it started: a `resync.required` goes before what
    /// follows). Returns false when it moved meanwhile or is gone.
    mutating func move(_ subscription: Key, from position: Int64, to newPosition: Int64, restarting: Bool) -> Bool {
        guard self.feeds[subscription.tenant]?.subscribers[subscription.id]?.position == position else { return false }
        self.feeds[subscription.tenant]!.subscribers[subscription.id]!.position = newPosition
        if restarting { self.feeds[subscription.tenant]!.subscribers[subscription.id]!.startedAt = newPosition }
        return true
    }

    /// Puts a subscriber that is at the newest event with nothing pending in live delivery:
    /// the hub writes its events to `sink` itself until it leaves (it falls behind, is closed,
    /// or the database goes on to another history), and wakes it for none of them.
    ///
    /// - Returns: whether it is live now (if not, its stream goes on pulling).
    mutating func goLive(_ subscription: Key, sink: LiveSink) -> Bool {
        guard !self.awaitsCursor, !self.isShuttingDown, self.feeds[subscription.tenant] != nil else { return false }
        self.nextLivePeriod += 1
        return self.feeds[subscription.tenant]!.goLive(subscription.id, sink: sink, period: self.nextLivePeriod)
    }

    /// A live subscriber's socket could not take the event after `position`, in live period
    /// `period`: it leaves live delivery there and pulls what follows.
    ///
    /// - Returns: its pull (nil when it already left that period, or is gone).
    mutating func fellBehind(_ subscription: Key, period: Int, at position: Int64) -> Wake? {
        guard self.feeds[subscription.tenant]?.leaveLive(subscription.id, at: position, period: period) == true else { return nil }
        return .pull(subscription)
    }

    /// Whether `tenant` has open streams (its events are worth encoding).
    func isStreamed(_ tenant: String) -> Bool { self.feeds[tenant] != nil }

    /// Whether some subscriber of `tenant` sees the events of `user`.
    func isStreamed(_ tenant: String, user: String) -> Bool { self.feeds[tenant]?.viewers.see(user) ?? false }

    /// Adds events to the feeds of their tenants (those in `encoded`, made outside the lock,
    /// or encoded here), closes subscribers that fell too far behind, and returns the
    /// wake-ups: a pull for every subscriber that may have something new, a close for each one
    /// closed; the events for live subscribers are added to `deliveries`.
    mutating func append(
        _ events: [StoredEvent], encoded: [Int64: LiveEvent], history: EventHistory, deliveries: inout LiveDeliveries
    ) -> [Wake] {
        var touched = Set<String>()
        for event in events where self.feeds[event.tenantId] != nil {
            if event.type == "user.erased", let user = event.userId { self.feeds[event.tenantId]!.forget(user: user) }
            // A feed that appeared since the encoding gets its event encoded here.
            self.feeds[event.tenantId]!.append(
                encoded[event.id] ?? LiveEvent(event, history: history), tenant: event.tenantId, deliveries: &deliveries)
            touched.insert(event.tenantId)
        }
        var wakes: [Wake] = []
        for tenant in touched {
            wakes += self.feeds[tenant]!.trim(
                to: self.options.recentEvents, bytes: self.options.recentEventBytes, maximumLag: self.options.maximumLag)
        }
        return wakes
    }

    /// The database went on from history `previous` to `history` (a failover): every feed
    /// drops what it holds and its subscribers go on as `Feed.follow(_:from:)` says, once
    /// `resume(from:)` is called.
    ///
    /// - Returns: the closes of the subscribers that end on a change of history.
    mutating func follow(_ history: EventHistory, from previous: String) -> [Wake] {
        self.awaitsCursor = true
        var wakes: [Wake] = []
        for tenant in self.feeds.keys { wakes += self.feeds[tenant]!.follow(history, from: previous) }
        return wakes
    }

    /// Serves again after `follow(_:from:)`: the hub stands at `position` in the new history.
    ///
    /// - Returns: a pull for every subscriber.
    mutating func resume(from position: Int64) -> [Wake] {
        guard self.awaitsCursor else { return [] }
        self.awaitsCursor = false
        var wakes: [Wake] = []
        for tenant in self.feeds.keys { wakes += self.feeds[tenant]!.resume(from: position) }
        return wakes
    }

    /// Closes every subscriber for `reason` and takes no more (shutdown).
    ///
    /// - Returns: their closes.
    mutating func closeAll(_ reason: EventHub.CloseReason) -> [Wake] {
        self.isShuttingDown = true
        var wakes: [Wake] = []
        for tenant in self.feeds.keys {
            self.feeds[tenant]!.leaveLiveAll()
            for id in self.feeds[tenant]!.subscribers.keys {
                self.feeds[tenant]!.subscribers[id]!.closeReason = reason
                wakes.append(.close(Key(tenant: tenant, id: id)))
            }
        }
        return wakes
    }
}
