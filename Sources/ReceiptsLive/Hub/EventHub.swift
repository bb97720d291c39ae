import CoreMetrics
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import Postgres
import ReceiptsStore
import ServiceLifecycle

/// Relays the event log to the streams of this process.
///
/// The store's `EventLogReader` yields every tenant's new events once, in id order, with no
/// event skipped that may still commit; the hub asks it to look right after a write of this
/// process commits (the store's `committedWrites`, which may hand over the read made behind
/// the write), and when its `PostgresListener` subscription hears `NOTIFY receipts_events`:
/// from psql and other tools (their triggers notify), and from other instances, which send
/// one NOTIFY at a time for their writes, as this hub's `PeerNotifier` does for its own while
/// it knows another instance listens. For each read, the hub fans out: it keeps the most
/// recent events in memory for tenants with open streams, and delivers or wakes their
/// subscribers (`EventHub+Taking.swift`).
/// A subscriber that is up to date is in live delivery: the hub writes each new event it may
/// see to its socket itself, encoded once, one hop to each event loop (`LiveSink`), and wakes
/// no task of the stream's. Any other subscriber pulls what is after its own position, from
/// memory or, when it is further behind, from the log, and goes live again once it caught up,
/// so a slow client never delays the others and memory stays bounded.
/// A subscriber that falls more than `maximumLag` events behind is closed with a reason; it
/// can resume from its last id.
///
/// Positions are of the database's current event history (`EventHistory`,
/// sql/functions/histories.sql), which every read of the log names. When the reader follows
/// the database to another one (a failover or a restore), the fan-out follows in the same
/// step: each subscriber goes on from its position, or from the newest one the new history
/// kept, with `resync.required` first when its client may hold events that were lost
/// (`Feed.follow(_:from:)`).
///
/// The hub is a shell; its decisions live in pure parts, each tested alone: `EventFanOut`
/// (the feeds and subscribers, which the reader holds under its lock as its mirror), and
/// `PeerNotifier` beside it (waking other instances). Credential notifications are not its
/// business: the server's `CredentialNotifications` subscribes to them itself.
public final class EventHub: Service, Sendable {
    /// The channel the triggers notify.
    public static let channel = ReceiptsStore.eventChannel

    /// Why a subscription ended.
    public enum CloseReason: String, Sendable {
        case tooSlow = "the client fell too far behind; reconnect with the last id to resume"
        case shuttingDown = "the server is shutting down; reconnect with the last id to resume"
        case credentialEnded = "the credential expired or was revoked; reconnect with a valid one and the last id"
        /// Only for subscriptions that asked for it (webhook deliveries, which start again from
        /// their position in the database); streams go on (`Feed.follow(_:from:)`).
        case historyChanged = "the database went on to another event history (a failover); start again from the last position"
    }

    let store: ReceiptsStore
    let listener: PostgresListener
    let options: Options
    let logger: Logger
    /// The event log, read in order, with the fan-out as its mirror.
    let log: EventLogReader<EventFanOut>
    /// The events taken into the feeds (`receipts_live_events_relayed_total`).
    let relayedEvents: CoreMetrics.Counter
    /// Each subscriber's wake-up, which the fan-out's `Wake`s name.
    let wakeUps: SubscriberWakeUps
    /// Makes taking a read and handing its live writes to the event loops one step: two
    /// reads taken at once (the sequence's and a writer's handover) reach the loops in the
    /// order the cursor took them.
    let appendOrder = NIOLock()
    /// The listener's notifications on `channel`.
    private let notifications: AsyncStream<PostgresListener.Event>
    /// Nil when `Options.notifiesOtherInstances` is off.
    private let peerNotifier: PeerNotifier?

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
        let wakeUps = SubscriberWakeUps()
        self.wakeUps = wakeUps
        self.log = EventLogReader(
            store: store, mirror: EventFanOut(options: options), perform: { wakeUps.perform($0) }, options: options.readerOptions,
            logger: logger, metrics: metrics ?? MetricsSystem.factory)
        self.relayedEvents = Counter(label: "receipts_live_events_relayed_total", factory: metrics ?? MetricsSystem.factory)
        self.notifications = listener.subscribe(to: Self.channel)
        self.peerNotifier =
            options.notifiesOtherInstances
            ? PeerNotifier(store: store, announcementInterval: options.peerAnnouncementInterval, logger: logger) : nil
    }

    /// Whether live events flow: the listener is connected and the hub knows its position.
    public var isLive: Bool {
        self.listener.isListening && self.log.standing.ready != nil
    }

    /// Relays notifications until graceful shutdown, then closes every stream.
    public func run() async throws {
        self.store.committedWrites.handEvents(to: self)
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await read in self.log { await self.take(read) }
                }
                group.addTask { await self.log.settleHistory() }
                group.addTask {
                    for await event in self.notifications {
                        switch event {
                        case .listening, .missed:
                            // Notifications may have been missed (a reconnect): read the log.
                            self.log.requestRead()
                            if case .listening = event { self.peerNotifier?.announce() }
                        case .notification(let notification) where notification.payload != self.peerNotifier?.payload:
                            self.log.requestRead()
                            self.peerNotifier?.heard(notification.payload)
                        case .notification:
                            break  // this instance's own
                        }
                    }
                }
                if let peerNotifier = self.peerNotifier {
                    group.addTask { await peerNotifier.run() }
                }
                self.log.requestRead()
                await group.next()
                group.cancelAll()
            }
        }
        self.closeAll(.shuttingDown)
    }

    /// Looks at the log until it is up to date, waits, or fails, and fans out what it reads
    /// (tests drive a hub that is not run with it, as notifications would).
    func refresh() async -> EventLogReadResult {
        await self.log.read { await self.take($0) }
    }

    /// The histories that led to the current one (nil before the hub has first looked at the log).
    package var history: EventHistory? { self.log.standing.history }

    /// The reader's position once it has settled where it stands in the log, and the
    /// histories it is of; throws `EventLogNotReady` (503 at the HTTP edge) when it has not in time.
    package func readyPosition() async throws -> (position: Int64, history: EventHistory) {
        try await self.log.readyPosition()
    }

    private func closeAll(_ reason: CloseReason) {
        self.wakeUps.perform(self.log.withMirror { fanOut, _ in fanOut.closeAll(reason) })
    }
}

extension EventHub.CloseReason: Error {}
