import Logging
import OTel
import ReceiptsStore
import ServiceLifecycle
import Tracing

/// Tracing, when `RECEIPTS_OTEL_ENDPOINT` is set: spans exported over OTLP/HTTP (swift-otel)
/// to that endpoint, as service `receiptsd`. The process's tracer is installed and
/// `ReceiptsTracing` turned on before anything is built; the returned service exports and,
/// on shutdown, flushes what is left. Unset: nothing is installed and no span is made.
///
/// Only traces: the metrics stay on `/metrics`, the logs on standard error. The standard
/// `OTEL_*` variables tune the exporter (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`,
/// `OTEL_TRACES_SAMPLER=parentbased_traceidratio` with `OTEL_TRACES_SAMPLER_ARG`, headers,
/// timeouts); `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, if set, wins over this endpoint.
enum TracingExport {
    static func start(endpoint: String?, logger: Logger) throws -> (any Service)? {
        guard let endpoint, !endpoint.isEmpty else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "receiptsd"
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.traces.otlpExporter.endpoint = Self.tracesURL(endpoint)
        let (tracer, service) = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(tracer)
        ReceiptsTracing.turnOn()
        logger.notice("tracing on: spans are exported over OTLP/HTTP", metadata: ["otel.endpoint": "\(endpoint)"])
        return service
    }

    /// The OTLP/HTTP traces URL of a collector's base endpoint (`…/v1/traces`, as the
    /// specification says of `OTEL_EXPORTER_OTLP_ENDPOINT`); a URL that already ends so is kept.
    static func tracesURL(_ endpoint: String) -> String {
        if endpoint.hasSuffix("/v1/traces") { return endpoint }
        return (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/traces"
    }
}
