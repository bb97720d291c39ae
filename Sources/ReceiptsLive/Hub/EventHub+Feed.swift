import DequeModule
import ReceiptsCore
import ReceiptsStore

/// The hub's memory per tenant with open streams (`Feed`), and what it keeps of each
/// subscriber: its position, what it must not be sent, and what it must be told first.
extension EventHub {
    struct Subscriber {
        let principal: Principal
        /// The last event id this subscriber has been given (or skipped as not its own).
        var position: Int64
        /// Where it started: its client holds the events (or, for a new stream, the state it
        /// loaded) up to about here; then the events it was given after it. After a failover,
        /// a subscriber is told `resync.required` only if its client may hold something lost
        /// (`Feed.follow(_:from:)`).
        var startedAt: Int64
        /// For a new stream: the events committed before it started, which are not sent.
        var committedBefore: CommittedBefore?
        var closeReason: CloseReason?
        /// Its client may hold events of a history the database lost (a failover): its next
        /// batch is `resync.required`, at its position, or at where the hub goes on from when
        /// nothing of the history before was kept (`Feed.resume(from:)`).
        var pendingResync: PendingResync?
        /// Closed (`CloseReason.historyChanged`) when the database goes on to another history,
        /// instead of going on.
        var closesOnHistoryChange = false
        /// Set while the hub writes its events to its socket itself (`LiveSink`): the live
        /// period it is in. Its `position` is then the feed's newest event (`Feed.newest`).
        var livePeriod: Int?
    }

    enum PendingResync {
        /// At the subscriber's position (the newest the new history kept).
        case atPosition
        /// At the position the hub goes on from in the new history.
        case atCursor
    }

    /// The events committed before a stream (or a webhook) began, not sent to it: those whose
    /// transaction had finished in `snapshot`, among the event ids up to `idsEnd`. Ids above it
    /// were handed out in a later history, after a failover, where transaction ids of the
    /// lost past may come again: those events are all later than the snapshot.
    struct CommittedBefore: Sendable {
        let snapshot: TransactionSnapshot
        var idsEnd = Int64.max

        func excludes(_ event: LiveEvent) -> Bool {
            event.id <= self.idsEnd && self.snapshot.hasFinished(event.transactionId)
        }
    }

    /// A `resync.required` to send: the position the stream goes on from, and its id.
    package struct Resync: Sendable {
        package let position: Int64
        package let eventId: String

        package var json: String { LiveEvent.resyncRequired(currentId: self.eventId) }
    }

    /// A tenant's events in memory while it has subscribers.
    struct Feed {
        /// Whose feed it is (its subscribers' `EventFanOut.Key`s).
        let tenant: String
        /// `recent` holds every event of the tenant after this position (up to the cursor).
        var coveredFrom: Int64
        var recent: Deque<LiveEvent> = []
        /// The `estimatedBytes` of `recent`.
        var recentBytes = 0
        var subscribers: [Int: Subscriber] = [:]
        /// The subscribers in live delivery (`LiveSink`), found by who may see an event.
        var live = LiveRoutes()
        /// Whose events the subscribers see, live or not (`StreamViewers`).
        var viewers = StreamViewers()

        /// The newest event memory has had: every live subscriber is there.
        var newest: Int64 { self.recent.last?.id ?? self.coveredFrom }

        /// The index in `recent` of the first event after `position`.
        func firstIndex(after position: Int64) -> Int {
            var low = 0
            var high = self.recent.count
            while low < high {
                let middle = (low + high) / 2
                if self.recent[middle].id <= position { low = middle + 1 } else { high = middle }
            }
            return low
        }

        /// How many events held in memory a subscriber at `position` has still to get. A
        /// subscriber before `coveredFrom` is catching up from the log (it resumed from an
        /// older id) at its own pace, holding nothing: it is not lagging the live stream.
        func liveLag(of position: Int64) -> Int {
            position < self.coveredFrom ? 0 : self.recent.count - self.firstIndex(after: position)
        }

        /// The next page of events held in memory for a subscriber, moving its position past
        /// them; or where to read from the log when it is behind what memory holds.
        mutating func pull(for id: Int, pageSize: Int) -> Pull {
            guard let subscriber = self.subscribers[id] else { return .closed(.shuttingDown) }
            if let reason = subscriber.closeReason { return .closed(reason) }
            if subscriber.livePeriod != nil {
                // The hub writes its events to its socket itself.
                return .events([], isUpToDate: true, committedBefore: nil)
            }
            if subscriber.pendingResync != nil {
                self.subscribers[id]!.pendingResync = nil
                return .resync(at: subscriber.position)
            }
            if subscriber.position < self.coveredFrom {
                return .fromLog(after: subscriber.position, through: self.coveredFrom, committedBefore: subscriber.committedBefore)
            }
            let start = self.firstIndex(after: subscriber.position)
            let end = min(self.recent.count, start + pageSize)
            guard start < end else { return .events([], isUpToDate: true, committedBefore: nil) }
            let events = Array(self.recent[start..<end])
            self.subscribers[id]!.position = events[events.count - 1].id
            return .events(events, isUpToDate: end == self.recent.count, committedBefore: subscriber.committedBefore)
        }

        /// Adds `event`, and its writes to the live subscribers who may see it to `deliveries`.
        /// When they do not fit there (`LiveDeliveries.limit`), every live subscriber of the feed
        /// leaves live delivery before the event instead, and pulls it (`trim` wakes them).
        mutating func append(_ event: LiveEvent, tenant: String, deliveries: inout LiveDeliveries) {
            let previous = self.newest
            let routes = self.live.routes(for: event)
            if !routes.isEmpty, !deliveries.hasRoom(for: routes.reduce(0) { $0 + $1.count }) {
                self.leaveLiveAll()
            } else {
                for group in routes { deliveries.add(event, after: previous, to: group, tenant: tenant) }
            }
            self.recent.append(event)
            self.recentBytes += event.estimatedBytes
        }

        /// Puts a subscriber that is at the newest event, with nothing pending, in live
        /// delivery through `sink`, in live period `period`.
        ///
        /// - Returns: whether it is live now.
        mutating func goLive(_ id: Int, sink: LiveSink, period: Int) -> Bool {
            guard let subscriber = self.subscribers[id], subscriber.closeReason == nil, subscriber.pendingResync == nil,
                subscriber.livePeriod == nil, subscriber.position >= self.coveredFrom,
                self.firstIndex(after: subscriber.position) == self.recent.count
            else { return false }
            self.subscribers[id]!.livePeriod = period
            self.live.insert(
                LiveRoute(sink: sink, period: period, committedBefore: subscriber.committedBefore), id: id,
                user: subscriber.principal.tokenUser)
            return true
        }

        /// Takes a subscriber out of live delivery, at `position` (the event before the first
        /// it was not given) or, when nil, at the newest event; `period`, when given, must be
        /// the live period it is in.
        ///
        /// - Returns: whether it was live (in `period`).
        @discardableResult
        mutating func leaveLive(_ id: Int, at position: Int64? = nil, period: Int? = nil) -> Bool {
            guard let subscriber = self.subscribers[id], let live = subscriber.livePeriod, period == nil || period == live else {
                return false
            }
            self.subscribers[id]!.livePeriod = nil
            self.subscribers[id]!.position = max(subscriber.position, position ?? self.newest)
            self.live.remove(id, user: subscriber.principal.tokenUser)
            return true
        }

        /// Takes every subscriber out of live delivery, at the newest event.
        mutating func leaveLiveAll() {
            for id in self.live.ids { self.leaveLive(id) }
        }

        /// After the database went on to another event history (a failover): every subscriber
        /// goes on from its position, or from the newest one `history` kept of `previous` when
        /// its own is later (it then gets everything after it again: what it skipped there was
        /// not for it, or lost). One whose client may hold something that was not kept (it
        /// started after what was kept, or was given an event after it, as far as memory tells;
        /// when it does not, it is taken to) gets `resync.required` first. When nothing was kept
        /// (a history this lineage does not have), every subscriber gets it, at the position the
        /// hub goes on from. Then drops what memory holds (ids of the history before); the feed
        /// serves nothing until `resume(from:)`.
        ///
        /// - Returns: the closes of the subscribers that end on a change of history.
        mutating func follow(_ history: EventHistory, from previous: String) -> [EventFanOut.Wake] {
            var closes: [EventFanOut.Wake] = []
            self.leaveLiveAll()
            let kept = history.keptThrough(currentIn: previous)
            let seen = kept.flatMap(self.firstVisible(after:))
            for (id, subscriber) in self.subscribers {
                if subscriber.closesOnHistoryChange {
                    if subscriber.closeReason == nil {
                        self.subscribers[id]!.closeReason = .historyChanged
                        closes.append(.close(EventFanOut.Key(tenant: self.tenant, id: id)))
                    }
                } else {
                    self.subscribers[id]!.follow(history, from: previous) { kept in
                        Self.mayHaveSentLost(to: subscriber, keptThrough: kept, seen: seen)
                    }
                }
            }
            self.recent.removeAll()
            self.recentBytes = 0
            return closes
        }

        /// The events memory holds after a position: the first one's id (the tenant key sees
        /// every event), and for each user the first one they may see.
        struct FirstVisible {
            var any: Int64?
            var byUser: [String: Int64] = [:]
        }

        /// `FirstVisible` after `kept`, in one pass over memory (bounded by the feed's byte
        /// budget, audiences included); nil when memory no longer holds every event after it.
        func firstVisible(after kept: Int64) -> FirstVisible? {
            guard self.coveredFrom <= kept else { return nil }
            var seen = FirstVisible()
            for event in self.recent[self.firstIndex(after: kept)...] {
                if seen.any == nil { seen.any = event.id }
                for user in event.audience where seen.byUser[user] == nil { seen.byUser[user] = event.id }
            }
            return seen
        }

        /// Whether `subscriber`'s client may hold something after `kept`: it started after it,
        /// or it may have been given an event after it (`seen`; nil: memory cannot tell, so it
        /// may). An event the subscriber skipped as committed before it started counts too:
        /// a resync.required too many, never one too few.
        static func mayHaveSentLost(to subscriber: Subscriber, keptThrough kept: Int64, seen: FirstVisible?) -> Bool {
            if subscriber.startedAt > kept { return true }
            guard subscriber.position > kept else { return false }
            guard let seen else { return true }
            let first = if let user = subscriber.principal.tokenUser { seen.byUser[user] } else { seen.any }
            return first.map { $0 <= subscriber.position } ?? false
        }

        /// Serves again after `follow(_:from:)`, once the hub knows where it stands in the new
        /// history: memory covers what comes after `position`; subscribers marked for
        /// `resync.required` go on from there.
        ///
        /// - Returns: a pull for every subscriber.
        mutating func resume(from position: Int64) -> [EventFanOut.Wake] {
            self.coveredFrom = position
            var wakes: [EventFanOut.Wake] = []
            for (id, subscriber) in self.subscribers {
                if subscriber.pendingResync == .atCursor {
                    self.subscribers[id]!.position = position
                    self.subscribers[id]!.startedAt = position
                }
                wakes.append(.pull(EventFanOut.Key(tenant: self.tenant, id: id)))
            }
            return wakes
        }

        /// Drops the events naming `user` as their userId: the user was erased, and replays
        /// from memory must not carry them any more than the log does.
        mutating func forget(user: String) {
            self.recent.removeAll { $0.userId == user }
            self.recentBytes = self.recent.reduce(0) { $0 + $1.estimatedBytes }
        }

        /// Drops the oldest events beyond `limit` or `byteLimit`, and marks the subscribers
        /// more than `maximumLag` behind as too slow.
        ///
        /// - Returns: a close for each subscriber closed now, and a pull for every one not in
        ///   live delivery.
        mutating func trim(to limit: Int, bytes byteLimit: Int, maximumLag: Int) -> [EventFanOut.Wake] {
            while let oldest = self.recent.first, self.recent.count > limit || self.recentBytes > byteLimit {
                self.coveredFrom = oldest.id
                self.recentBytes -= oldest.estimatedBytes
                self.recent.removeFirst()
            }
            var wakes: [EventFanOut.Wake] = []
            wakes.reserveCapacity(self.subscribers.count)
            for (id, subscriber) in self.subscribers {
                let key = EventFanOut.Key(tenant: self.tenant, id: id)
                if subscriber.closeReason == nil && subscriber.livePeriod == nil && self.liveLag(of: subscriber.position) > maximumLag {
                    self.subscribers[id]!.closeReason = .tooSlow
                    wakes.append(.close(key))
                }
                if subscriber.livePeriod == nil { wakes.append(.pull(key)) }
            }
            return wakes
        }
    }

    /// The live routes of a feed: the tenant key's streams see every event, a user's those
    /// whose audience names the user.
    struct LiveRoutes {
        private(set) var everyone: [Int: LiveRoute] = [:]
        private(set) var byUser: [String: [Int: LiveRoute]] = [:]

        var ids: [Int] { Array(self.everyone.keys) + self.byUser.values.flatMap(\.keys) }

        /// The routes of those who may see `event`: the tenant key's, and those of the users its
        /// audience names (looked up from the smaller side).
        func routes(for event: LiveEvent) -> [[Int: LiveRoute]] {
            var found: [[Int: LiveRoute]] = self.everyone.isEmpty ? [] : [self.everyone]
            if self.byUser.count < event.audience.count {
                for (user, routes) in self.byUser where event.audience.contains(user) { found.append(routes) }
            } else {
                for user in event.audience { if let routes = self.byUser[user] { found.append(routes) } }
            }
            return found
        }

        mutating func insert(_ route: LiveRoute, id: Int, user: String?) {
            if let user { self.byUser[user, default: [:]][id] = route } else { self.everyone[id] = route }
        }

        mutating func remove(_ id: Int, user: String?) {
            guard let user else {
                self.everyone[id] = nil
                return
            }
            self.byUser[user]?[id] = nil
            if self.byUser[user]?.isEmpty == true { self.byUser[user] = nil }
        }
    }
}

extension EventHub.Subscriber {
    /// Takes the database's going on from history `previous` to `history`, for a stream open
    /// through it or one whose start was resolved before it: the subscriber goes on from its
    /// position, or from the newest one `history` kept when its own is later, with
    /// `resync.required` first when `mayHoldLost` says its client may hold something after
    /// that; from the position the hub goes on from, after `resync.required`, when nothing
    /// of `previous` was kept (a history this lineage does not have).
    mutating func follow(_ history: EventHistory, from previous: String, mayHoldLost: (_ kept: Int64) -> Bool) {
        guard let kept = history.keptThrough(currentIn: previous) else {
            self.pendingResync = .atCursor
            return
        }
        if mayHoldLost(kept) { self.pendingResync = self.pendingResync ?? .atPosition }
        self.position = min(self.position, kept)
        self.startedAt = min(self.startedAt, kept)
        if var committedBefore = self.committedBefore {
            committedBefore.idsEnd = min(committedBefore.idsEnd, history.idsEnd(of: previous))
            self.committedBefore = committedBefore
        }
    }
}
