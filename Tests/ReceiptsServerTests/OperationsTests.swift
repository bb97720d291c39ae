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
