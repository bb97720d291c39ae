import ReceiptsCore
import ReceiptsStore

/// Streams joining and leaving the hub, and going live.
extension EventHub {
    /// Where a new stream starts.
    public struct Start: Sendable {
        package let tenant: String
        package let position: Int64
        /// The event history `position` is in (`EventHistory`).
        package let history: String
        /// See `Subscriber.committedBefore`.
        let committedBefore: CommittedBefore?
        /// Set when the client's `after` was unknown, expired, or of a history the database
        /// lost: the `resync.required` to send first, carrying `position` (where the stream
        /// goes on from).
        package let resync: Resync?
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

    /// `readyPosition()`, and where the tenant's log stands, in the same event history.
    func readyLogPosition(tenant: String) async throws -> (position: Int64, history: EventHistory, log: EventLogPosition) {
        try await self.log.readyLogPosition(tenant: tenant)
    }

    /// Registers a stream, woken through `wake` (from the first pull on); events after `start`
    /// are delivered through the subscription. One that `closesOnHistoryChange` ends with
    /// `CloseReason.historyChanged` when the database goes on to another event history; any
    /// other goes on (`Feed.follow(_:from:)`).
    func subscribe(_ principal: Principal, from start: Start, closesOnHistoryChange: Bool = false, wake: SubscriberWake) -> EventSubscription {
        let (key, wakes) = self.log.withMirror { fanOut, log in
            let (key, wakes) = fanOut.subscribe(
                principal, from: start, closesOnHistoryChange: closesOnHistoryChange, history: log.history, cursor: log.position)
            // Under the fan-out's lock: whatever wakes it from now on finds its wake-up.
            self.wakeUps.register(wake, for: key)
            return (key, wakes)
        }
        self.wakeUps.perform(wakes)
        return EventSubscription(hub: self, id: key.id, tenant: key.tenant, principal: principal, resync: start.resync)
    }

    /// Registers a stream whose task waits for its wake-ups on `wakeups` (see
    /// `subscribe(_:from:closesOnHistoryChange:wake:)`).
    package func subscribe(
        _ principal: Principal, from start: Start, closesOnHistoryChange: Bool = false
    ) -> (subscription: EventSubscription, wakeups: AsyncStream<Void>) {
        let (wakeups, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let subscription = self.subscribe(principal, from: start, closesOnHistoryChange: closesOnHistoryChange, wake: SubscriberWake(wake))
        return (subscription, wakeups)
    }

    /// Closes one subscription (its stream ends with `reason`).
    package func close(_ subscription: EventSubscription, _ reason: CloseReason) {
        let wake = self.log.withMirror { fanOut, _ in fanOut.close(subscription.key, reason) }
        self.wakeUps.perform(wake.map { [$0] } ?? [])
    }

    /// Puts a subscription that is up to date in live delivery: the hub writes its events to
    /// `sink` itself, and wakes it only when it must pull again (see `EventFanOut.goLive`).
    ///
    /// - Returns: whether it is live now.
    @discardableResult
    func goLive(_ subscription: EventSubscription, sink: LiveSink) -> Bool {
        self.log.withMirror { fanOut, _ in fanOut.goLive(subscription.key, sink: sink) }
    }

    /// Whether the hub writes a subscription's events itself now (for tests).
    func isLive(_ subscription: EventSubscription) -> Bool {
        self.log.withMirror { fanOut, _ in fanOut.feeds[subscription.tenant]?.subscribers[subscription.id]?.livePeriod != nil }
    }

    /// A live subscriber's socket could not take an event: it pulls from `position` on.
    func fellBehind(_ subscription: EventFanOut.Key, period: Int, at position: Int64) {
        let wake = self.log.withMirror { fanOut, _ in fanOut.fellBehind(subscription, period: period, at: position) }
        self.wakeUps.perform(wake.map { [$0] } ?? [])
    }

    func unsubscribe(_ subscription: EventSubscription) {
        self.log.withMirror { fanOut, _ in fanOut.unsubscribe(subscription.key) }
        self.wakeUps.remove(subscription.key)
    }

    /// The number of open streams (for tests and metrics).
    public var subscriberCount: Int {
        self.log.withMirror { fanOut, _ in fanOut.subscriberCount }
    }
}
