import DequeModule
import Logging
import NIOConcurrencyHelpers
import Postgres
import ReceiptsStore
import ServiceLifecycle

/// Relays the event log to the streams of this process.
///
/// One `PostgresListener` connection wakes the hub on `NOTIFY receipts_events, '<tenant>'`;
/// the hub reads the tenant's new events once, keeps the most recent ones in memory, and
/// wakes that tenant's subscribers. Each subscriber pulls what is after its own position,
/// from memory or, when it is further behind, from the log, so a slow client never delays
/// the others and memory stays bounded. A subscriber that falls more than `maximumLag`
/// events behind is closed with a reason; it can resume from its last id.
///
/// Event ids are gap-free per tenant and visible in id order (see
/// `sql/migrations/0003_event_log.sql`), so "everything after my position" never skips an
/// event and never repeats one.
public final class EventHub: Service, Sendable {
    /// The channel the triggers notify.
    public static let channel = "receipts_events"

    /// Tuning knobs.
    public struct Options: Sendable {
        /// Recent events kept in memory per tenant with subscribers.
        public var recentEvents: Int
        /// How far behind a subscriber may fall before it is closed.
        public var maximumLag: Int
        /// Events read from the log per query.
        public var pageSize: Int

        public init(recentEvents: Int = 10_000, maximumLag: Int = 5_000, pageSize: Int = 500) {
            self.recentEvents = recentEvents
            self.maximumLag = maximumLag
            self.pageSize = pageSize
        }
    }

    /// Why a subscription ended.
    public enum CloseReason: String, Sendable {
        case tooSlow = "the client fell too far behind; reconnect with the last id to resume"
        case shuttingDown = "the server is shutting down; reconnect with the last id to resume"
    }

    struct Subscriber {
        let principal: Principal
        /// The last tenant event id this subscriber has been given (or skipped as invisible).
        var position: Int64
        let wake: AsyncStream<Void>.Continuation
        var closeReason: CloseReason?
    }

    struct Feed {
        /// The newest event id read from the log.
        var cursor: Int64
        /// The most recent events, contiguous ids ending at `cursor`.
        var recent: Deque<LiveEvent> = []
        var subscribers: [Int: Subscriber] = [:]
    }

    struct State {
        var feeds: [String: Feed] = [:]
        var nextSubscriberId = 0
        var isShuttingDown = false
    }

    let store: ReceiptsStore
    let listener: PostgresListener
    let options: Options
    let logger: Logger
    let state = NIOLockedValueBox(State())

    public init(store: ReceiptsStore, listener: PostgresListener, options: Options = Options(), logger: Logger) {
        self.store = store
        self.listener = listener
        self.options = options
        self.logger = logger
    }

    /// Whether live events flow: the listener is connected.
    public var isLive: Bool { self.listener.isListening }

    /// Relays notifications until graceful shutdown, then closes every stream.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            for await event in self.listener.events {
                switch event {
                case .listening:
                    // After a reconnect notifications may have been missed: catch up every feed.
                    for tenant in self.state.withLockedValue({ Array($0.feeds.keys) }) {
                        await self.refresh(tenant: tenant)
                    }
                case .notification(let notification) where notification.channel == Self.channel:
                    await self.refresh(tenant: notification.payload)
                case .notification:
                    break
                }
            }
        }
        self.closeAll(.shuttingDown)
    }

    // MARK: - Subscribing

    /// Where a new stream starts: its position, and whether the client must resync first.
    public struct Start: Sendable {
        let tenant: String
        let position: Int64
        /// Set when the client's `after` was unknown or expired: the current id to send in
        /// `resync.required`.
        let resyncId: Int64?
    }

    /// Resolves where a stream starts, before the handshake response is sent: after `after`
    /// when the log still has everything after it, else at the current end.
    public func start(tenant: String, after: String?) async throws -> Start {
        let positions = try await self.store.eventPositions(tenant: tenant)
        guard let after else { return Start(tenant: tenant, position: positions.last, resyncId: nil) }
        if let position = Int64(after), positions.canResume(after: position) {
            return Start(tenant: tenant, position: position, resyncId: nil)
        }
        return Start(tenant: tenant, position: positions.last, resyncId: positions.last)
    }

    /// Registers a stream; events after `start` are delivered through the subscription.
    func subscribe(_ principal: Principal, from start: Start) async -> EventSubscription {
        let (wakeups, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = self.state.withLockedValue { state -> Int in
            let id = state.nextSubscriberId
            state.nextSubscriberId += 1
            var feed = state.feeds[start.tenant] ?? Feed(cursor: start.position)
            feed.subscribers[id] = Subscriber(principal: principal, position: start.position, wake: wake, closeReason: nil)
            state.feeds[start.tenant] = feed
            if state.isShuttingDown { wake.finish() }
            return id
        }
        wake.yield()
        // Events committed while the feed did not exist yet were not relayed: look now.
        await self.refresh(tenant: start.tenant)
        return EventSubscription(hub: self, id: id, tenant: start.tenant, principal: principal, resyncId: start.resyncId, wakeups: wakeups)
    }

    /// Closes one subscription (its stream ends with `reason`).
    func close(_ subscription: EventSubscription, _ reason: CloseReason) {
        let wake = self.state.withLockedValue { state -> AsyncStream<Void>.Continuation? in
            guard state.feeds[subscription.tenant]?.subscribers[subscription.id] != nil else { return nil }
            state.feeds[subscription.tenant]?.subscribers[subscription.id]?.closeReason = reason
            return state.feeds[subscription.tenant]?.subscribers[subscription.id]?.wake
        }
        wake?.finish()
    }

    /// Wakes a subscription without new events (for heartbeats).
    func wake(_ subscription: EventSubscription) {
        let wake = self.state.withLockedValue { $0.feeds[subscription.tenant]?.subscribers[subscription.id]?.wake }
        wake?.yield()
    }

    func unsubscribe(_ subscription: EventSubscription) {
        self.state.withLockedValue { state in
            state.feeds[subscription.tenant]?.subscribers[subscription.id] = nil
            if state.feeds[subscription.tenant]?.subscribers.isEmpty == true {
                state.feeds[subscription.tenant] = nil
            }
        }
    }

    /// The number of open streams (for tests and metrics).
    public var subscriberCount: Int {
        self.state.withLockedValue { $0.feeds.values.reduce(0) { $0 + $1.subscribers.count } }
    }

    // MARK: - Delivering

    private enum Pull {
        case events([LiveEvent])
        case fromLog(after: Int64)
        case closed(CloseReason)
    }

    /// The next events for a subscription that it may see, oldest first; empty when it is up
    /// to date. Throws `CloseReason` when the subscription was closed.
    func nextEvents(for subscription: EventSubscription) async throws -> [LiveEvent] {
        let pull = self.state.withLockedValue { state -> Pull in
            guard var feed = state.feeds[subscription.tenant], var subscriber = feed.subscribers[subscription.id] else {
                return .closed(.shuttingDown)
            }
            if let reason = subscriber.closeReason { return .closed(reason) }
            guard subscriber.position < feed.cursor else { return .events([]) }
            guard let first = feed.recent.first, first.id <= subscriber.position + 1 else {
                return .fromLog(after: subscriber.position)
            }
            let start = Int(subscriber.position + 1 - first.id)
            let end = min(feed.recent.count, start + self.options.pageSize)
            let events = Array(feed.recent[start..<end])
            subscriber.position = events.last?.id ?? subscriber.position
            feed.subscribers[subscription.id] = subscriber
            state.feeds[subscription.tenant] = feed
            return .events(events)
        }
        switch pull {
        case .closed(let reason):
            throw reason
        case .events(let events):
            return events.filter { $0.isVisible(to: subscription.principal) }
        case .fromLog(let position):
            let stored = try await self.store.events(tenant: subscription.tenant, after: position, limit: self.options.pageSize)
            let events = stored.map(LiveEvent.init)
            guard let last = events.last else { return [] }
            self.state.withLockedValue { state in
                if let subscriber = state.feeds[subscription.tenant]?.subscribers[subscription.id], subscriber.position == position {
                    state.feeds[subscription.tenant]?.subscribers[subscription.id]?.position = last.id
                }
            }
            return events.filter { $0.isVisible(to: subscription.principal) }
        }
    }

    /// Reads the tenant's new events into its feed and wakes its subscribers.
    func refresh(tenant: String) async {
        while let cursor = self.state.withLockedValue({ $0.feeds[tenant]?.cursor }) {
            let stored: [StoredEvent]
            do {
                stored = try await self.store.events(tenant: tenant, after: cursor, limit: self.options.pageSize)
            } catch {
                self.logger.error("reading the event log failed", metadata: ["receipts.tenant_id": "\(tenant)", "error": "\(error)"])
                return
            }
            let events = stored.map(LiveEvent.init)
            let wakes = self.state.withLockedValue { state -> [AsyncStream<Void>.Continuation] in
                guard var feed = state.feeds[tenant] else { return [] }
                for event in events where event.id == feed.cursor + 1 {
                    feed.recent.append(event)
                    feed.cursor = event.id
                }
                if feed.recent.count > self.options.recentEvents {
                    feed.recent.removeFirst(feed.recent.count - self.options.recentEvents)
                }
                for (id, subscriber) in feed.subscribers
                where subscriber.closeReason == nil && feed.cursor - subscriber.position > Int64(self.options.maximumLag) {
                    feed.subscribers[id]?.closeReason = .tooSlow
                    subscriber.wake.finish()
                }
                state.feeds[tenant] = feed
                return feed.subscribers.values.map(\.wake)
            }
            for wake in wakes { wake.yield() }
            if stored.count < self.options.pageSize { return }
        }
    }

    private func closeAll(_ reason: CloseReason) {
        let wakes = self.state.withLockedValue { state -> [AsyncStream<Void>.Continuation] in
            state.isShuttingDown = true
            var wakes: [AsyncStream<Void>.Continuation] = []
            for tenant in state.feeds.keys {
                for id in state.feeds[tenant]!.subscribers.keys {
                    state.feeds[tenant]!.subscribers[id]!.closeReason = reason
                    wakes.append(state.feeds[tenant]!.subscribers[id]!.wake)
                }
            }
            return wakes
        }
        for wake in wakes { wake.finish() }
    }
}

extension EventHub.CloseReason: Error {}
