import Hummingbird
import Logging
import Postgres

/// Liveness and readiness for load balancers and orchestrators.
struct HealthController<Context: RequestContext>: Sendable {
    let pool: PostgresConnectionPool

    struct Status: ResponseEncodable {
        let status: String
    }

    func addRoutes(to router: Router<Context>) {
        router.get("healthz") { _, _ in Status(status: "ok") }
        router.get("readyz") { _, context in try await self.readiness(context: context) }
    }

    /// Ready when the database answers.
    private func readiness(context: Context) async throws -> Status {
        do {
            try await self.pool.query("SELECT 1")
        } catch {
            context.logger.warning("readiness check failed", metadata: ["error": "\(error)"])
            throw APIError(.serviceUnavailable, .unavailable, "the database is unreachable")
        }
        return Status(status: "ready")
    }
}
