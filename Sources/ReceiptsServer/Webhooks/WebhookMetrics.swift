import CoreMetrics
import NIOConcurrencyHelpers

/// The webhooks' metrics:
/// - `receipts_webhook_deliveries_total{outcome}`: attempts at a batch by outcome
///   (`delivered`, `http_status`, `timeout`, `connection_failed`, `address_refused`);
/// - `receipts_webhook_events_delivered_total`: events in acknowledged batches;
/// - `receipts_webhook_attempt_seconds`: how long attempts took, whatever their outcome;
/// - `receipts_webhook_lag_events{webhook="<tenant>/<id>"}`: events a webhook has still to
///   deliver, for the webhooks this instance delivers (a series per webhook: at most
///   `WebhookController.maximumPerTenant` per tenant, dropped when the instance stops
///   delivering it);
/// - `receipts_webhooks_delivering`: the webhooks this instance holds the lease of.
final class WebhookMetrics: Sendable {
    private let factory: any MetricsFactory
    private let outcomes: NIOLockedValueBox<[String: Counter]> = NIOLockedValueBox([:])
    private let eventsDelivered: Counter
    private let attemptDuration: Timer
    private let delivering: Gauge

    init(factory: any MetricsFactory) {
        self.factory = factory
        self.eventsDelivered = Counter(label: "receipts_webhook_events_delivered_total", factory: factory)
        self.attemptDuration = Timer(label: "receipts_webhook_attempt_seconds", factory: factory)
        self.delivering = Gauge(label: "receipts_webhooks_delivering", factory: factory)
    }

    /// Counts an attempt at a batch of `events` events.
    func recordAttempt(outcome: String, events: Int, duration: Duration) {
        let counter = self.outcomes.withLockedValue { made in
            if let counter = made[outcome] { return counter }
            let counter = Counter(label: "receipts_webhook_deliveries_total", dimensions: [("outcome", outcome)], factory: self.factory)
            made[outcome] = counter
            return counter
        }
        counter.increment()
        if outcome == "delivered" { self.eventsDelivered.increment(by: events) }
        self.attemptDuration.recordNanoseconds(duration.nanoseconds)
    }

    func recordDelivering(_ count: Int) {
        self.delivering.record(count)
    }

    /// The lag gauge of one webhook, made when its delivery starts here.
    func lagGauge(for key: String) -> Gauge {
        Gauge(label: "receipts_webhook_lag_events", dimensions: [("webhook", key)], factory: self.factory)
    }
}
