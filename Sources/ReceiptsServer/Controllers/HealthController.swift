import Hummingbird
import Logging
import Postgres

/// Liveness and readiness for load balancers and orchestrators.
struct HealthController<Context: RequestContext>: Sendable {
    let pool: PostgresConnectionPool
    let hub: EventHub

    struct Status: ResponseEncodable {
        let status: String
    }

    func addRoutes(to router: Router<Context>) {
        router.get("healthz") { _, _ in Status(status: "ok") }
        router.get("readyz") { _, context in try await self.readiness(context: context) }
    }

    /// Ready when the database answers and the event listener is connected.
    private func readiness(context: Context) async throws -> Status {
        do {
            try await self.pool.query("SELECT 1")
        } catch {
            context.logger.warning("readiness check failed", metadata: ["error": "\(error)"])
            throw APIError(.serviceUnavailable, .unavailable, "the database is unreachable")
        }
        guard self.hub.isLive else {
            throw APIError(.serviceUnavailable, .unavailable, "the event listener is not connected")
        }
        return Status(status: "ready")
    }
}
