import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

/// Traces exported over OTLP (`RECEIPTS_OTEL_ENDPOINT`), checked at a local OTLP/HTTP
/// receiver (JSON encoding): a backend's trace continues through Receipts and back into its
/// webhook handler. The service runs as a process of its own: a tracer is process-wide.
@Suite("Traces over OTLP")
struct TracingTests {
    /// A backend's own trace and the span it calls Receipts from.
    static let traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let callerSpan = "00f067aa0ba902b7"

    @Test("a read sent with a traceparent: the request, its batch, the SQL call, the event's relay and the webhook delivery are spans of that trace; the receiver gets the trace's traceparent")
    func readToWebhook() async throws {
        let collector = try await WebhookReceiver.start()
        defer { Task { await collector.stop() } }
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        // A database of its own: the instance's event hub then reads only this test's events,
        // not wait at the gaps of every other test's open transactions.
        try await TestDatabase.withFreshDatabase { url in
            let adminToken = TestDatabase.uniqueName("admin")
            let service = try await ReceiptsdProcess.start(
                arguments: [],
                environment: [
                    "DATABASE_URL": url, "RECEIPTS_ADMIN_TOKEN": adminToken, "LOG_LEVEL": "error",
                    "RECEIPTS_OTEL_ENDPOINT": "http://127.0.0.1:\(collector.port)", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                    "OTEL_BSP_SCHEDULE_DELAY": "100", "RECEIPTS_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
                ])
            defer { service.kill() }
            try await Self.traceReadToWebhook(at: service, adminToken: adminToken, collector: collector, receiver: receiver)
        }
    }

    static func traceReadToWebhook(
        at service: ReceiptsdProcess, adminToken: String, collector: WebhookReceiver, receiver: WebhookReceiver
    ) async throws {
        var create = HTTPClientRequest(url: service.baseURL + "/admin/v1/tenants")
        create.method = .POST
        create.headers.add(name: "Authorization", value: "Bearer \(adminToken)")
        create.headers.add(name: "Content-Type", value: "application/json")
        create.body = .bytes(ByteBuffer(string: #"{"name":"traced"}"#))
        let created = try await HTTPClient.shared.execute(create, timeout: .seconds(10))
        let tenant = try JSONSerialization.jsonObject(with: Data(String(buffer: try await created.body.collect(upTo: 1 << 16)).utf8)) as? [String: Any]
        let key = try #require(tenant?["apiKey"] as? String, "\(String(describing: tenant))")
        func call(_ method: HTTPMethod, _ path: String, _ body: String?, headers: [(String, String)] = []) async throws -> HTTPResponseStatus {
            var request = HTTPClientRequest(url: service.baseURL + path)
            request.method = method
            request.headers.add(name: "Authorization", value: "Bearer \(key)")
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: body))
            }
            return try await HTTPClient.shared.execute(request, timeout: .seconds(10)).status
        }
        #expect(try await call(.PUT, "/v1/chats/g", #"{"kind":"group","members":["a","b"]}"#) == .created)
        #expect(try await call(.PUT, "/v1/webhooks/backend", #"{"url":"\#(receiver.url)","events":["receipt.read"]}"#) == .created)
        #expect(try await call(.POST, "/v1/chats/g/messages", #"{"id":"m1","senderId":"a","text":"hi"}"#) == .created)

        // The backend's call, in its own trace.
        let traceParent = "00-\(Self.traceId)-\(Self.callerSpan)-01"
        #expect(try await call(.POST, "/v1/chats/g/read", #"{"userId":"b"}"#, headers: [("traceparent", traceParent)]) == .ok)

        // The receipt.read reaches the webhook receiver with the backend's trace.
        let delivered = await receiver.wait { requests in requests.contains { $0.text.contains("receipt.read") } }
        let delivery = try #require(delivered.first { $0.text.contains("receipt.read") })
        let sentParent = try #require(delivery.headers["traceparent"], "the delivery carries no traceparent: \(delivery.headers)")
        let parts = sentParent.split(separator: "-")
        #expect(parts.count == 4 && parts[1] == Self.traceId[...], "\(sentParent) \(delivered.map { $0.headers["traceparent"] ?? "-" })")

        // And the collector has the trace's spans, each under the one before.
        var spans: [String: Span] = [:]
        let wanted = ["/v1/chats/{chatId}/read", "receipts.batch reads", "SELECT receipts.mark_read", "receipts.webhook.delivery"]
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            spans = Dictionary(
                Self.spans(in: collector.requests).filter { $0.traceId == Self.traceId }.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            if wanted.allSatisfy({ spans[$0] != nil }) && spans["receipts.relay"] != nil { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let request = try #require(spans["/v1/chats/{chatId}/read"], "spans of the trace: \(spans.keys.sorted())")
        #expect(request.parentSpanId == Self.callerSpan)
        #expect(request.kind == 2)  // server
        let batch = try #require(spans["receipts.batch reads"])
        #expect(batch.parentSpanId == request.spanId)
        let statement = try #require(spans["SELECT receipts.mark_read"])
        #expect(statement.parentSpanId == batch.spanId)
        #expect(statement.kind == 3)  // client
        let relay = try #require(spans["receipts.relay"])
        #expect(relay.parentSpanId == batch.spanId)
        let webhook = try #require(spans["receipts.webhook.delivery"])
        #expect(webhook.parentSpanId == batch.spanId)
        // The receiver's parent: the delivery's span, or the HTTP client's span under it.
        let receiverParent = parts.count == 4 ? String(parts[2]) : ""
        let clientSpan = Self.spans(in: collector.requests).first { $0.spanId == receiverParent }
        #expect(receiverParent == webhook.spanId || clientSpan?.parentSpanId == webhook.spanId, "\(sentParent)")
        // Nothing of the SQL's values, and no token, in any span.
        let everything = collector.requests.map(\.text).joined()
        #expect(!everything.contains(key))
    }

    @Test("without RECEIPTS_OTEL_ENDPOINT nothing is exported, and a webhook delivery carries no traceparent")
    func offByDefault() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await WebhookTests.withService { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            #expect(try await WebhookTests.putWebhook("backend", url: receiver.url, tenant: tenant).status == .created)
            _ = try await client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey, body: #"{"senderId":"a","text":"hi"}"#,
                headers: [.init("traceparent")!: "00-\(Self.traceId)-\(Self.callerSpan)-01"])
            let requests = await receiver.wait { !$0.isEmpty }
            #expect(!requests.isEmpty)
            #expect(requests.allSatisfy { $0.headers["traceparent"] == nil })
        }
    }

    /// A span as OTLP/JSON carries it (ids in hex).
    struct Span {
        let name: String
        let traceId: String
        let spanId: String
        let parentSpanId: String
        let kind: Int
    }

    /// Every span of the OTLP/JSON export requests received.
    static func spans(in requests: [WebhookReceiver.Request]) -> [Span] {
        requests.flatMap { request -> [Span] in
            let resources = request.json["resourceSpans"] as? [[String: Any]] ?? []
            return resources.flatMap { resource in
                (resource["scopeSpans"] as? [[String: Any]] ?? []).flatMap { scope in
                    (scope["spans"] as? [[String: Any]] ?? []).map { span in
                        Span(
                            name: span["name"] as? String ?? "", traceId: Self.hex(span["traceId"]), spanId: Self.hex(span["spanId"]),
                            parentSpanId: Self.hex(span["parentSpanId"]),
                            kind: (span["kind"] as? Int) ?? Int(span["kind"] as? String ?? "") ?? Self.kindNumber(span["kind"] as? String))
                    }
                }
            }
        }
    }

    /// OTLP/JSON writes ids as hex (the specification); some exporters as base64, as protobuf's JSON mapping does.
    static func hex(_ value: Any?) -> String {
        guard let text = value as? String, !text.isEmpty else { return "" }
        if text.count == 32 || text.count == 16, text.allSatisfy(\.isHexDigit) { return text.lowercased() }
        guard let data = Data(base64Encoded: text) else { return text }
        return data.map { String(format: "%02x", $0) }.joined()
    }

    static func kindNumber(_ name: String?) -> Int {
        ["SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5][name ?? ""] ?? 0
    }
}
