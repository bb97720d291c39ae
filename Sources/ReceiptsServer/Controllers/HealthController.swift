import Hummingbird
import NIOCore
import Logging
import Postgres

/// Liveness and readiness for load balancers and orchestrators.
struct HealthController<Context: RequestContext>: Sendable {
    let pool: PostgresConnectionPool
    let hub: EventHub
    /// The longest the readiness check waits for the database, well inside DESIGN's 2 s:
    /// an orchestrator must learn of an outage fast, whatever a request may wait.
    var checkTimeout: Duration = .milliseconds(1500)

    struct Status: ResponseEncodable {
        let status: String
    }

    func addRoutes(to router: Router<Context>) {
        router.get("healthz") { _, _ in Status(status: "ok") }
        router.get("readyz") { _, context in try await self.readiness(context: context) }
    }

    /// Ready when the database answers within `checkTimeout` and the event listener is
    /// connected.
    private func readiness(context: Context) async throws -> Status {
        do {
            try await self.checkDatabase()
        } catch {
            context.logger.warning("readiness check failed", metadata: Self.metadata(of: error))
            throw APIError(.serviceUnavailable, .unavailable, "the database is unreachable")
        }
        guard self.hub.isLive else {
            throw APIError(.serviceUnavailable, .unavailable, "the event listener is not connected")
        }
        return Status(status: "ready")
    }

    /// `SELECT 1` on a pooled connection, given up after `checkTimeout`: the wait for a
    /// connection is bounded by the lease timeout, and a statement that does not answer (a
    /// server that stopped answering) is cancelled when the deadline passes.
    private func checkDatabase() async throws {
        let timeout = self.checkTimeout
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                _ = try await self.pool.withConnection(leaseTimeout: TimeAmount(timeout)) { try await $0.query("SELECT 1") }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw PostgresError(code: .poolTimeout, message: "the database did not answer within \(timeout)")
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    private static func metadata(of error: any Error) -> Logger.Metadata {
        guard let error = error as? PostgresError else { return ["error": "\(error)"] }
        var metadata: Logger.Metadata = ["postgres.error": "\(error.code)"]
        if let sqlState = error.sqlState { metadata["postgres.sqlstate"] = "\(sqlState)" }
        return metadata
    }
}
