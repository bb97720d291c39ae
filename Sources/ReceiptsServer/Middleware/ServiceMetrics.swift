import CoreMetrics
import NIOConcurrencyHelpers
import Prometheus
import ReceiptsLive
import ReceiptsStore

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
    /// The four reads a standby may serve, by the server that answered (`ReplicaReads`).
    private let readsFromPrimary: CoreMetrics.Counter
    private let readsFromReplica: CoreMetrics.Counter
    /// Reads that waited for a standby to replay their position, by who answered then.
    private let waitsEndingOnReplica: CoreMetrics.Counter
    private let waitsEndingOnPrimary: CoreMetrics.Counter
    /// Write answers sent without a consistency token (its position could not be read).
    private let untokenedWrites: CoreMetrics.Counter
    /// Each standby's lag and whether it serves reads, made at the first scrape that saw it.
    private let standbyGauges = NIOLockedValueBox([String: (lag: CoreMetrics.Gauge, usable: CoreMetrics.Gauge)]())
    /// Requests refused 429 by `TenantAdmission`, by rule.
    private let refusals: [AdmissionRefusal: CoreMetrics.Counter]
    /// The event streams open, by kind (`OpenStreams.Kind`).
    private let streamsOpen: [OpenStreams.Kind: CoreMetrics.Gauge]
    /// The open streams of the tenant with the most, as a share of its cap.
    private let busiestTenantStreams: CoreMetrics.Gauge
    /// HTTP connections served (streams included), and the cap on them.
    private let connectionsOpen: CoreMetrics.Gauge
    private let connectionsMaximum: CoreMetrics.Gauge
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
        // Requests a batch statement did (`receipts_batch_requests`).
        factory.valueHistogramBuckets[ReceiptsStore.batchRequestsMetric] = [1, 2, 4, 8, 16, 32, 64, 128, 256]
        self.factory = factory
        self.streamsOpen = Dictionary(uniqueKeysWithValues: OpenStreams.Kind.allCases.map { kind in
            (kind, CoreMetrics.Gauge(label: "receipts_streams_open", dimensions: [("kind", kind.label)], factory: factory))
        })
        self.busiestTenantStreams = CoreMetrics.Gauge(label: "receipts_streams_busiest_tenant_ratio", factory: factory)
        self.connectionsOpen = CoreMetrics.Gauge(label: "receipts_http_connections_open", factory: factory)
        self.connectionsMaximum = CoreMetrics.Gauge(label: "receipts_http_connections_max", factory: factory)
        self.poolOpen = CoreMetrics.Gauge(label: "receipts_db_pool_connections_open", factory: factory)
        self.poolLeased = CoreMetrics.Gauge(label: "receipts_db_pool_connections_leased", factory: factory)
        self.poolWaiting = CoreMetrics.Gauge(label: "receipts_db_pool_waiting_leases", factory: factory)
        self.requestsInFlight = CoreMetrics.Gauge(label: "receipts_tenant_requests_in_flight", factory: factory)
        self.readsFromPrimary = Counter(label: "receipts_reads_total", dimensions: [("source", "primary")], factory: factory)
        self.readsFromReplica = Counter(label: "receipts_reads_total", dimensions: [("source", "replica")], factory: factory)
        self.waitsEndingOnReplica = Counter(label: "receipts_replica_waits_total", dimensions: [("served_by", "replica")], factory: factory)
        self.waitsEndingOnPrimary = Counter(label: "receipts_replica_waits_total", dimensions: [("served_by", "primary")], factory: factory)
        self.untokenedWrites = Counter(label: "receipts_writes_without_token_total", factory: factory)
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

    /// Counts one of the four reads a standby may serve.
    func recordRead(from source: ReadSource, waited: Bool) {
        switch source {
        case .primary:
            self.readsFromPrimary.increment()
            if waited { self.waitsEndingOnPrimary.increment() }
        case .replica:
            self.readsFromReplica.increment()
            if waited { self.waitsEndingOnReplica.increment() }
        }
    }

    func recordUntokenedWrite() {
        self.untokenedWrites.increment()
    }

    /// Records each standby's state (at each scrape): `receipts_replica_lag_seconds` (NaN
    /// while unknown: unreachable or promoted) and `receipts_replica_usable` (1 or 0).
    func recordStandbys(_ states: [StandbyReads.StandbyState]) {
        for state in states {
            let gauges = self.standbyGauges.withLockedValue { made in
                if let gauges = made[state.server] { return gauges }
                let dimensions = [("server", state.server)]
                let gauges = (
                    lag: CoreMetrics.Gauge(label: "receipts_replica_lag_seconds", dimensions: dimensions, factory: self.factory),
                    usable: CoreMetrics.Gauge(label: "receipts_replica_usable", dimensions: dimensions, factory: self.factory)
                )
                made[state.server] = gauges
                return gauges
            }
            gauges.lag.record(state.lag.map { Double($0.nanoseconds) / 1e9 } ?? .nan)
            gauges.usable.record(state.isUsable ? 1 : 0)
        }
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

    /// Records the streams open by kind, the busiest tenant's share of its cap, and the
    /// connections served beside their cap (at each scrape).
    func recordStreams(_ streams: OpenStreams, busiestTenantShare: Double, connections: (open: Int, maximum: Int)) {
        for (kind, gauge) in self.streamsOpen { gauge.record(streams.open(kind)) }
        self.busiestTenantStreams.record(busiestTenantShare)
        self.connectionsOpen.record(connections.open)
        self.connectionsMaximum.record(connections.maximum)
    }

    func recordPoolUsage(_ usage: (open: Int, leased: Int, waiting: Int)) {
        self.poolOpen.record(usage.open)
        self.poolLeased.record(usage.leased)
        self.poolWaiting.record(usage.waiting)
    }

    /// Everything in the Prometheus text format, the process's own metrics last
    /// (`ProcessMetrics`).
    func exposition() -> [UInt8] {
        var buffer = self.registry.emitToBuffer()
        ProcessMetrics.now()?.emit(into: &buffer)
        return buffer
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = self.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
