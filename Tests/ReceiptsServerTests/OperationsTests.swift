import Foundation
import HTTPTypes
import Hummingbird
import Postgres
import ReceiptsLive
import ReceiptsServer
import ReceiptsStore
import TestSupport
import Testing

@Suite("Operations endpoints")
struct OperationsTests {
    @Test("/metrics shows request counts and latencies by route and status, and pool usage")
    func metrics() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            _ = try await client.request(.get, "/v1/chats/nope", as: tenant.apiKey)
            let response = try await client.request(.get, "/metrics", as: nil)
            #expect(response.status == .ok)
            #expect(response.contentType?.hasPrefix("text/plain") == true)
            let text = response.body
            #expect(text.contains(#"receipts_http_requests_total{method="PUT",route="/v1/chats/{chatId}",status="201"} 1"#))
            #expect(text.contains(#"receipts_http_requests_total{method="GET",route="/v1/chats/{chatId}",status="404"} 1"#))
            #expect(text.contains("receipts_http_request_duration_seconds_bucket"))
            #expect(text.contains("receipts_db_pool_connections_open"))
            #expect(!text.contains("route=\"/v1/chats/g\""))
        }
    }

    @Test("/metrics shows the streams open by kind and near their caps, the connections, events relayed, requests per batch and the process's own metrics")
    func streamAndProcessMetrics() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { webSocket, _ in
                try await StreamClients.withEventSource(port: client.port, credential: tenant.apiKey) { eventSource in
                    let id = try await tenant.send(in: "g", from: "a")
                    try await tenant.read(in: "g", by: "b", ["messageIds": [id]])
                    // message.created, unread.changed and receipt.read, on both streams.
                    #expect(await webSocket.take(3).count == 3)
                    #expect(await eventSource.take(3).count == 3)

                    let text = try await client.request(.get, "/metrics", as: nil).body
                    func value(_ series: String) -> Double? {
                        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) }
                    }
                    #expect(value(#"receipts_streams_open{kind="websocket"}"#) == 1)
                    #expect(value(#"receipts_streams_open{kind="sse"}"#) == 1)
                    // Two of the tenant's cap of 10,000.
                    #expect(value("receipts_streams_busiest_tenant_ratio") == 2.0 / 10_000)
                    #expect((value("receipts_http_connections_open") ?? 0) >= 2)
                    #expect(value("receipts_http_connections_max") == Double(TestService.configuration().maximumConnections))
                    #expect((value("receipts_live_events_relayed_total") ?? 0) >= 3)
                    #expect(value(#"receipts_batch_requests_count{kind="reads"}"#) == 1)
                    #expect(value(#"receipts_batch_requests_bucket{kind="reads",le="1.0"}"#) == 1)
                    #expect(value(#"receipts_batch_requests_count{kind="sends"}"#) == 1)
                    #expect(text.contains("# TYPE process_cpu_seconds_total counter"))
                    #expect((value("process_cpu_seconds_total") ?? 0) > 0)
                    #expect((value("process_resident_memory_bytes") ?? 0) > 1_000_000)
                    #expect((value("process_open_fds") ?? 0) >= 2)
                    #expect((value("process_max_fds") ?? 0) >= (value("process_open_fds") ?? .infinity))
                    let started = value("process_start_time_seconds") ?? 0
                    #expect(abs(started - Date().timeIntervalSince1970) < 24 * 3600)
                }
            }
        }
    }

    @Test("/openapi.yaml serves the repository's openapi.yaml, which documents exactly the routes the server serves")
    func openAPIMatchesRoutes() async throws {
        let pool = PostgresConnectionPool(configuration: TestDatabase.configuration, logger: TestDatabase.logger)
        let store = ReceiptsStore(pool: pool, logger: TestDatabase.logger)
        let listener = PostgresListener(configuration: TestDatabase.configuration, logger: TestDatabase.logger)
        let components = ServiceComponents(
            configuration: TestService.configuration(),
            pool: pool,
            store: store,
            hub: EventHub(store: store, listener: listener, logger: TestDatabase.logger),
            metrics: ServiceMetrics()
        )
        let routes = buildRouter(components).routes.map { ($0.method, $0.path.description) }
            + buildWebSocketRouter(components).routes.map { ($0.method, $0.path.description) }
        let served = Set(routes.map { "\($0.0.rawValue.lowercased()) \(Self.normalized($0.1))" })

        try await TestService.run { client in
            let response = try await client.request(.get, "/openapi.yaml", as: nil)
            #expect(response.status == .ok)
            #expect(response.body.hasPrefix("openapi: 3.1"))
            // What is served is the repository's file, byte for byte.
            #expect(response.body == (try String(contentsOfFile: "openapi.yaml", encoding: .utf8)))
            #expect(served == Self.operations(inYAML: response.body))
            #expect(served.count >= 20)
        }
    }

    /// `/v1/chats/:chatId` and `/v1/chats/{chatId}` both become `/v1/chats/{}`.
    static func normalized(_ path: String) -> String {
        let withSlash = path.hasPrefix("/") ? path : "/" + path
        return withSlash.split(separator: "/", omittingEmptySubsequences: false).map { part in
            part.hasPrefix(":") || (part.hasPrefix("{") && part.hasSuffix("}")) ? "{}" : String(part)
        }.joined(separator: "/")
    }

    /// "method path" for every operation under `paths:` (two-space path keys, four-space methods).
    static func operations(inYAML yaml: String) -> Set<String> {
        var operations: Set<String> = []
        var inPaths = false
        var currentPath: String?
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "paths:" { inPaths = true; continue }
            guard inPaths else { continue }
            if !line.isEmpty, !line.hasPrefix(" ") { break }
            if line.hasPrefix("  /"), !line.hasPrefix("   ") {
                currentPath = String(line.dropFirst(2).dropLast()).trimmingCharacters(in: CharacterSet(charactersIn: "'\""))
            } else if let currentPath, line.hasPrefix("    "), !line.hasPrefix("     ") {
                let key = line.trimmingCharacters(in: .whitespaces).dropLast()
                if ["get", "put", "post", "delete", "patch"].contains(String(key)) {
                    operations.insert("\(key) \(normalized(currentPath))")
                }
            }
        }
        return operations
    }
}
