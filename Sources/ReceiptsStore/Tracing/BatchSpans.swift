import Tracing

/// The spans of one batch statement, when tracing is on (`ReceiptsTracing`): the batch
/// (`receipts.batch <kind>`: child of its first request's span, linked to the others'
/// requests), and under it the SQL call (a client span named after the function it calls,
/// from its send to its answer).
struct BatchSpans {
    let batch: any Span
    let statement: any Span

    /// The spans of a batch of `requests` whose requests' traces are `traces` (nil when
    /// tracing is off or no request has a trace), for the statement `sql`.
    static func start(kind: String, requests: Int, traces: [ServiceContext], sql: String) -> BatchSpans? {
        guard ReceiptsTracing.isOn, let first = traces.first else { return nil }
        let tracer = InstrumentationSystem.tracer
        let batch = tracer.startSpan("receipts.batch \(kind)", context: first, ofKind: .internal)
        for other in traces.dropFirst() { batch.addLink(SpanLink(context: other, attributes: [:])) }
        batch.attributes["receipts.batch.kind"] = kind
        batch.attributes["receipts.batch.requests"] = requests
        let summary = Self.summary(of: sql)
        let statement = tracer.startSpan(summary, context: batch.context, ofKind: .client)
        statement.attributes["db.system.name"] = "postgresql"
        statement.attributes["db.query.summary"] = summary
        return BatchSpans(batch: batch, statement: statement)
    }

    /// The batch span's `traceparent`: what the events the statement adds carry.
    var traceParent: String? { ReceiptsTracing.traceParent(of: self.batch.context) }

    /// The statement was answered (or failed with `error`); the batch is done once its
    /// requests are answered (`end()`).
    func answered(error: (any Error)? = nil) {
        if let error { self.statement.recordError(error) }
        self.statement.end()
    }

    func end(error: (any Error)? = nil) {
        if let error { self.batch.recordError(error) }
        self.batch.end()
    }

    /// `SELECT * FROM receipts.mark_read_each($1, …)` → `SELECT receipts.mark_read_each`: what
    /// the statement calls, never its values (they are parameters anyway).
    static func summary(of sql: String) -> String {
        guard let start = sql.firstRange(of: "receipts.") else { return "SELECT" }
        let name = sql[start.lowerBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." }
        return "SELECT \(name)"
    }
}
