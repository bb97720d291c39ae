import ReceiptsCore
import ReceiptsStore

/// What a subscriber that is not live pulls: from memory, or from the log when it is further behind.
extension EventHub {
    /// The next events a subscription may see, oldest first.
    package struct Batch {
        package var events: [LiveEvent]
        /// Nothing more is there for the subscription right now.
        package var isUpToDate: Bool
        /// Set when retention deleted events the subscription still needed, or its position
        /// was of a history the database lost: the `resync.required` to send (before
        /// `events`, which follow it).
        package var resync: Resync? = nil
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
    package func nextEvents(for subscription: EventSubscription) async throws -> Batch {
        let (pull, history) = self.log.withMirror { fanOut, log in
            (fanOut.pull(for: subscription.key), log.history)
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
                self.log.requestRead()
                return Batch(events: [], isUpToDate: true)
            }
            if page.prunedThrough > position {
                // Retention deleted events after `position` while the subscription caught up:
                // it cannot have them all. As for an expired id at the start: resync.required
                // with the current id, then on from there (live, from memory).
                let current = self.log.withMirror { fanOut, log -> Int64? in
                    guard let current = log.position, log.isIn(history.currentId) else { return nil }
                    let restart = max(current, through)
                    return fanOut.move(subscription.key, from: position, to: restart, restarting: true) ? restart : nil
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
            let moved = self.log.withMirror { fanOut, log in
                log.isIn(history.currentId) && fanOut.move(subscription.key, from: position, to: reached, restarting: false)
            }
            // Moved meanwhile (the database went on to another history, or the subscription
            // ended): the next pull says where it is.
            guard moved else { return Batch(events: [], isUpToDate: false) }
            return Batch(
                events: shown(stored.map { LiveEvent($0, history: history, totals: totals[$0]) }, committedBefore: committedBefore),
                isUpToDate: false)
        }
    }
}
