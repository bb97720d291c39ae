import ReceiptsStore

extension EventHub {
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

        /// What the event log reader takes of them.
        var readerOptions: EventLogReader<EventFanOut>.Options {
            .init(pageSize: self.pageSize, abandonGapsAfter: self.abandonGapsAfter, historySettleInterval: self.historySettleInterval)
        }
    }
}
