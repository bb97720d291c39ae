import NIOConcurrencyHelpers
import ReceiptsStore

extension EventHub {
    /// Where a webhook's delivery starts: after `position` (its acknowledged position, written
    /// while `positionHistory` was the current event history) when it means the same in the
    /// current history and the log still holds everything after it, skipping the events that
    /// had committed in `committedBefore` (before the webhook existed). When `sent`, the newest
    /// position sent to the receiver (in the history named), or `position` itself, is of a
    /// history the database lost (a failover), the receiver may hold events the database no
    /// longer has: `resync` is set, and delivery goes on after the newest position kept. As for
    /// a stream resuming from an expired id otherwise: at the current position, with `resync`.
    package func startDelivery(
        tenant: String, after position: Int64, positionHistory: String, sent: (position: Int64, history: String)?,
        committedBefore: TransactionSnapshot
    ) async throws -> Start {
        let (current, history, log) = try await self.readyLogPosition(tenant: tenant)
        var sentWasLost = false
        if let sent, case .lost = history.position(sent.position, currentIn: sent.history) { sentWasLost = true }
        // The snapshot was taken in `positionHistory` or before (a webhook's row is written in
        // the history it is read in): its transaction ids mean nothing past that.
        let before = CommittedBefore(snapshot: committedBefore, idsEnd: history.idsEnd(of: positionHistory))
        let resumed: (position: Int64, resync: Bool)? =
            switch history.position(position, currentIn: positionHistory) {
            case .position(let position): (position, sentWasLost)
            case .lost(let kept): (kept, true)
            case .unknown: nil
            }
        if let resumed, log.canResume(after: resumed.position) {
            return Start(
                tenant: tenant, position: resumed.position, history: history.currentId, committedBefore: before,
                resync: resumed.resync ? Resync(position: resumed.position, eventId: history.eventId(resumed.position)) : nil)
        }
        return Start(
            tenant: tenant, position: current, history: history.currentId, committedBefore: CommittedBefore(snapshot: log.snapshot),
            resync: Resync(position: current, eventId: history.eventId(current)))
    }

    /// How far a subscription has been given events (or skipped those not for it): after a
    /// `nextEvents(for:)`, every event of its tenant up to here was in that batch or before.
    package func position(of subscription: EventSubscription) -> Int64? {
        self.log.withMirror { fanOut, _ in fanOut.position(of: subscription.key) }
    }
}
