import Logging
import NIOConcurrencyHelpers
import NIOCore
import Postgres
import ServiceLifecycle

/// Checks the database (`SELECT 1` on a pooled connection) every `interval` in the
/// background, so that `/readyz` answers from the outcome at once: a readiness probe never
/// waits for a database that has stopped answering (a blocked libpq call cannot be
/// abandoned, only cancelled over the network), and the service reads as unready within
/// `staleAfter` of losing the database however it is lost (README, "Limits, timeouts and
/// faults": within 2 s).
///
/// Run it as a `Service`; until its first check succeeds, it reads as unhealthy.
final class DatabaseHealthMonitor: Service, Sendable {
    private struct State {
        var lastSuccess: ContinuousClock.Instant?
        var lastCheckFailed = true
    }

    let pool: PostgresConnectionPool
    let interval: Duration
    let staleAfter: Duration
    private let logger: Logger
    private let state = NIOLockedValueBox(State())

    init(pool: PostgresConnectionPool, interval: Duration = .milliseconds(500), staleAfter: Duration = .milliseconds(1500), logger: Logger) {
        self.pool = pool
        self.interval = interval
        self.staleAfter = staleAfter
        self.logger = logger
    }

    /// Whether the last check succeeded, no longer than `staleAfter` ago.
    var isHealthy: Bool {
        self.state.withLockedValue { state in
            guard !state.lastCheckFailed, let lastSuccess = state.lastSuccess else { return false }
            return ContinuousClock.now - lastSuccess < self.staleAfter
        }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.check()
                try? await Task.sleep(for: self.interval)
            }
        }
    }

    private func check() async {
        do {
            _ = try await self.pool.withConnection(leaseTimeout: TimeAmount(self.staleAfter)) { try await $0.query("SELECT 1") }
            let wasFailing = self.state.withLockedValue { state in
                defer {
                    state.lastSuccess = .now
                    state.lastCheckFailed = false
                }
                return state.lastCheckFailed && state.lastSuccess != nil
            }
            if wasFailing { self.logger.info("the database answers again") }
        } catch {
            let wasHealthy = self.state.withLockedValue { state in
                defer { state.lastCheckFailed = true }
                return !state.lastCheckFailed
            }
            if wasHealthy {
                var metadata: Logger.Metadata = [:]
                if let error = error as? PostgresError {
                    metadata["postgres.error"] = "\(error.code)"
                    if let sqlState = error.sqlState { metadata["postgres.sqlstate"] = "\(sqlState)" }
                }
                self.logger.warning("the database does not answer", metadata: metadata)
            }
        }
    }
}
