import Hummingbird
import Postgres
import ReceiptsLive
import ReceiptsStore

/// `/metrics` (Prometheus text) and `/openapi.yaml`, the contract: the repository's
/// `openapi.yaml`, embedded in the binary at build time (`Package.swift`, `resources`).
struct OperationsController {
    let metrics: ServiceMetrics
    let pool: PostgresConnectionPool
    let admission: TenantAdmissionGate
    /// The standbys reads may go to, if any: their lag at each scrape.
    let standbys: StandbyReads?
    /// The open streams and their caps, and the connections served.
    let streams: StreamGuards
    let connections: ConnectionSlots

    func addRoutes(to router: Router<ReceiptsRequestContext>) {
        router.get("metrics", use: self.prometheus)
        router.get("openapi.yaml", use: self.openAPI)
    }

    @Sendable func prometheus(_ request: Request, context: ReceiptsRequestContext) async throws -> Response {
        self.metrics.recordPoolUsage(self.pool.usage)
        self.metrics.recordRequestsInFlight(self.admission.inFlight)
        if let standbys { self.metrics.recordStandbys(standbys.states) }
        self.metrics.recordStreams(
            self.streams.openStreams, busiestTenantShare: self.streams.limiter.busiestTenantShare,
            connections: (self.connections.openConnections, self.connections.maximum))
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: self.metrics.exposition())))
    }

    @Sendable func openAPI(_ request: Request, context: ReceiptsRequestContext) async throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/yaml; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: PackageResources.openapi_yaml)))
    }
}
