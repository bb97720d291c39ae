import NIOConcurrencyHelpers
import ReceiptsStore

extension EventHub {
    /// Where a webhook's delivery starts: after `position` (its acknowledged position) when
    /// the log still holds everything after it, skipping the events that had committed in
    /// `committedBefore` (before the webhook existed); otherwise, as for a stream resuming
    /// from an expired id, at the current position with `resyncId` set.
    func startDelivery(tenant: String, after position: Int64, committedBefore: TransactionSnapshot) async throws -> Start {
        let current = try await self.readyPosition()
        let log = try await self.store.eventLogPosition(tenant: tenant)
        if log.canResume(after: position) {
            return Start(tenant: tenant, position: position, committedBefore: committedBefore, resyncId: nil)
        }
        return Start(tenant: tenant, position: current, committedBefore: log.snapshot, resyncId: current)
    }

    /// How far a subscription has been given events (or skipped those not for it): after a
    /// `nextEvents(for:)`, every event of its tenant up to here was in that batch or before.
    func position(of subscription: EventSubscription) -> Int64? {
        self.state.withLockedValue { $0.feeds[subscription.tenant]?.subscribers[subscription.id]?.position }
    }
}
