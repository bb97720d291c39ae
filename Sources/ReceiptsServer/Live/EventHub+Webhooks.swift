import NIOConcurrencyHelpers
import ReceiptsStore

extension EventHub {
    /// Where a webhook's delivery starts: after `position` (its acknowledged position, written
    /// while `positionHistory` was the current event history) when it means the same in the
    /// current history and the log still holds everything after it, skipping the events that
    /// had committed in `committedBefore` (before the webhook existed); otherwise, as for a
    /// stream resuming from an expired id or one of a lost history, at the current position
    /// with `resync` set. So too when `sent`, the newest position sent to the receiver (in the
    /// history named), is not kept by the current history: the receiver may hold events the
    /// database no longer has.
    func startDelivery(
        tenant: String, after position: Int64, positionHistory: String, sent: (position: Int64, history: String)?,
        committedBefore: TransactionSnapshot
    ) async throws -> Start {
        let (current, history, log) = try await self.readyLogPosition(tenant: tenant)
        let sentIsKept: Bool
        if let sent, case .unknown = history.position(sent.position, currentIn: sent.history) {
            sentIsKept = false
        } else {
            sentIsKept = true
        }
        if sentIsKept, case .position(let position) = history.position(position, currentIn: positionHistory),
            log.canResume(after: position)
        {
            // The snapshot was taken in `positionHistory` or before (a webhook's row is written
            // in the history it is read in): its transaction ids mean nothing past that.
            let before = CommittedBefore(snapshot: committedBefore, idsEnd: history.idsEnd(of: positionHistory))
            return Start(tenant: tenant, position: position, history: history.currentId, committedBefore: before, resync: nil)
        }
        return Start(
            tenant: tenant, position: current, history: history.currentId, committedBefore: CommittedBefore(snapshot: log.snapshot),
            resync: Resync(position: current, eventId: history.eventId(current)))
    }

    /// The current event histories (nil before the hub has first looked at the log).
    var history: EventHistory? {
        self.state.withLockedValue { $0.history }
    }

    /// How far a subscription has been given events (or skipped those not for it): after a
    /// `nextEvents(for:)`, every event of its tenant up to here was in that batch or before.
    func position(of subscription: EventSubscription) -> Int64? {
        self.state.withLockedValue { $0.feeds[subscription.tenant]?.subscribers[subscription.id]?.position }
    }
}
