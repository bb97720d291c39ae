import Hummingbird
import Logging
import ReceiptsLive

/// Liveness and readiness for load balancers and orchestrators.
struct HealthController<Context: RequestContext>: Sendable {
    let database: DatabaseHealthMonitor
    let hub: EventHub

    /// `{"status":…}`
    struct Status: JSONResponse {
        let status: String
    }

    func addRoutes(to router: Router<Context>) {
        router.get("healthz") { _, _ in Status(status: "ok") }
        router.get("readyz") { _, _ in try self.readiness() }
    }

    /// Ready when the database answered the monitor's last check, lately, and the event
    /// listener is connected. Answers at once, from what is known: never waits for the
    /// database.
    private func readiness() throws -> Status {
        guard self.database.isHealthy else {
            throw APIError(.serviceUnavailable, .unavailable, "the database is unreachable")
        }
        guard self.hub.isLive else {
            throw APIError(.serviceUnavailable, .unavailable, "the event listener is not connected")
        }
        return Status(status: "ready")
    }
}
