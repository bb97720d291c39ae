import Synchronization
import Tracing

/// Whether the service makes spans (swift-distributed-tracing), and what they share.
///
/// Off by default: `receiptsd` turns it on, once, before it serves, when
/// `RECEIPTS_OTEL_ENDPOINT` is set (it installs the OTLP exporter as the process's tracer).
/// While off, the code that would make a span reads this flag and nothing else: no context
/// is captured, no span made, no setting sent with a batch.
///
/// The spans: the request (Hummingbird's `TracingMiddleware`, which continues a W3C
/// `traceparent` it is sent), its batch and the batch's SQL statement (`runBatches`, a span
/// per batch, child of its first request's span and linked to the others'), a SQL call of the
/// store outside batches, the event's relay to the hub, and the webhook delivery. A batch's
/// span is written with each event it adds to the log (`traceParentSetting`, the column
/// `receipts.events.trace_parent`), so the webhook delivery of that event, on whichever
/// instance, continues the trace and sends `traceparent` on to the receiver.
public enum ReceiptsTracing {
    private static let on = Atomic<Bool>(false)

    /// Whether spans are made.
    public static var isOn: Bool { self.on.load(ordering: .relaxed) }

    /// Turns spans on for the process (after `InstrumentationSystem.bootstrap`).
    public static func turnOn() {
        self.on.store(true, ordering: .relaxed)
    }

    /// The transaction's run-time parameter the event log's rows take their trace parent
    /// from (`receipts.events.trace_parent`'s default, sql/migrations/0027_event_trace_parent.sql).
    public static let traceParentSetting = "receipts.trace_parent"

    /// The W3C `traceparent` of `context`'s span, as the installed instrument writes it; nil
    /// when it has none.
    public static func traceParent(of context: ServiceContext) -> String? {
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &carrier, using: DictionaryCarrier())
        return carrier["traceparent"]
    }

    /// The context a W3C `traceparent` names, as the installed instrument reads it.
    public static func context(continuing traceParent: String) -> ServiceContext {
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(["traceparent": traceParent], into: &context, using: DictionaryCarrier())
        return context
    }

    /// Headers as a dictionary, for `inject` and `extract`.
    public struct DictionaryCarrier: Injector, Extractor {
        public init() {}

        public func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
            carrier[key] = value
        }

        public func extract(key: String, from carrier: [String: String]) -> String? {
            carrier[key]
        }
    }
}
