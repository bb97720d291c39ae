import NIOConcurrencyHelpers
import Postgres

/// One hot standby the service reads from: its pool, and what the last check saw of it.
final class Standby: Sendable {
    /// `host:port`, for logs and the lag metric.
    let server: String
    let pool: PostgresConnectionPool
    /// How far it has replayed, read on demand (a read waiting for a position).
    let replay: PositionProbe
    private let state = NIOLockedValueBox(Health())

    /// What the checks saw.
    struct Health: Sendable {
        /// The replay position the last check saw, or a newer one a probe saw since (between
        /// two checks it only grows; a check sets it as it finds it, so a standby rebuilt from
        /// an older copy is not taken for further along than it is).
        var replayed: WALPosition?
        /// Whether the last check reached it and found it in recovery.
        var isStandby = false
        /// Its lag behind the primary at the last check; nil while unknown.
        var lag: Duration?
    }

    init(server: String, pool: PostgresConnectionPool) {
        self.server = server
        self.pool = pool
        self.replay = .replay(on: pool)
    }

    var health: Health { self.state.withLockedValue { $0 } }

    /// Whether it may serve reads: in recovery, reached at the last check, at most
    /// `maximumLag` behind.
    func isUsable(maximumLag: Duration) -> Bool {
        self.state.withLockedValue { $0.isStandby && ($0.lag.map { $0 <= maximumLag } ?? false) }
    }

    /// Whether it may serve a read that must show everything up to `position`.
    func hasReplayed(_ position: WALPosition) -> Bool {
        self.state.withLockedValue { health in health.replayed.map { $0 >= position } ?? false }
    }

    /// Records a check's outcome.
    func checked(replayed: WALPosition?, lag: Duration?) {
        self.state.withLockedValue { health in
            health.isStandby = replayed != nil
            health.replayed = replayed
            health.lag = replayed == nil ? nil : lag
        }
    }

    /// Records a replay position a probe read.
    func replayed(_ position: WALPosition) {
        self.state.withLockedValue { health in health.replayed = max(position, health.replayed ?? position) }
    }

    /// Takes it out of service until the next check finds it well (a read on it failed).
    func failed() {
        self.state.withLockedValue { $0.isStandby = false }
    }
}
