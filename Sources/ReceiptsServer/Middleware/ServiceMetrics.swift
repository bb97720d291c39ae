import CoreMetrics
import NIOConcurrencyHelpers
import Prometheus

/// The service's Prometheus metrics, kept in a registry of its own (not the global
/// `MetricsSystem`), so that each application, in tests too, has its own.
///
/// Labels are bounded: method, route pattern (never an id), status.
public final class ServiceMetrics: Sendable {
    private let registry = PrometheusCollectorRegistry()
    /// Also for the metrics of other parts (the event hub's).
    let factory: PrometheusMetricsFactory
    private let poolOpen: CoreMetrics.Gauge
    private let poolLeased: CoreMetrics.Gauge
    private let poolWaiting: CoreMetrics.Gauge
    private let requestsInFlight: CoreMetrics.Gauge
    /// Requests refused 429 by `TenantAdmission`, by rule.
    private let refusals: [AdmissionRefusal: CoreMetrics.Counter]
    /// The count and duration of each method, route and status seen, made once: making them
    /// anew per request (the factory's lookup checks and hashes the names and labels each
    /// time) cost about 3 % of the service's CPU under load (perf).
    private let requestMetrics = NIOLockedValueBox([RequestKey: RequestMetrics]())

    private struct RequestKey: Hashable {
        var method: String
        var route: String
        var status: Int
    }

    private struct RequestMetrics {
        var count: CoreMetrics.Counter
        var duration: CoreMetrics.Timer
    }

    public init() {
        var factory = PrometheusMetricsFactory(registry: self.registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(2.5), .seconds(5),
        ]
        self.factory = factory
        self.poolOpen = CoreMetrics.Gauge(label: "receipts_db_pool_connections_open", factory: factory)
        self.poolLeased = CoreMetrics.Gauge(label: "receipts_db_pool_connections_leased", factory: factory)
        self.poolWaiting = CoreMetrics.Gauge(label: "receipts_db_pool_waiting_leases", factory: factory)
        self.requestsInFlight = CoreMetrics.Gauge(label: "receipts_tenant_requests_in_flight", factory: factory)
        let reasons: [(AdmissionRefusal, String)] = [
            (.rateLimited, "rate_limited"), (.queueFull, "queue_full"), (.overShare, "over_share"),
        ]
        self.refusals = Dictionary(uniqueKeysWithValues: reasons.map { refusal, reason in
            (refusal, Counter(label: "receipts_tenant_refusals_total", dimensions: [("reason", reason)], factory: factory))
        })
    }

    /// Counts a request refused 429 by the fairness rules.
    func recordRefusal(_ refusal: AdmissionRefusal) {
        self.refusals[refusal]?.increment()
    }

    /// Records the tenants' requests in flight (at each scrape).
    func recordRequestsInFlight(_ count: Int) {
        self.requestsInFlight.record(count)
    }

    /// Counts a finished request and records its duration.
    func recordRequest(method: String, route: String, status: Int, duration: Duration) {
        let key = RequestKey(method: method, route: route, status: status)
        let metrics = self.requestMetrics.withLockedValue { made in
            if let metrics = made[key] { return metrics }
            let dimensions = [("method", method), ("route", route), ("status", String(status))]
            let metrics = RequestMetrics(
                count: Counter(label: "receipts_http_requests_total", dimensions: dimensions, factory: self.factory),
                duration: Timer(label: "receipts_http_request_duration_seconds", dimensions: dimensions, factory: self.factory)
            )
            made[key] = metrics
            return metrics
        }
        metrics.count.increment()
        metrics.duration.recordNanoseconds(duration.nanoseconds)
    }

    func recordPoolUsage(_ usage: (open: Int, leased: Int, waiting: Int)) {
        self.poolOpen.record(usage.open)
        self.poolLeased.record(usage.leased)
        self.poolWaiting.record(usage.waiting)
    }

    /// Everything in the Prometheus text format.
    func exposition() -> [UInt8] {
        self.registry.emitToBuffer()
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = self.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
