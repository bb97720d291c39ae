import Logging
import NIOConcurrencyHelpers
import NIOCore
import Postgres
import ServiceLifecycle

/// Which server answered a read (`Receipts-Read-Source`).
public enum ReadSource: String, Sendable {
    case primary
    case replica
}

/// Reads served by hot standbys (docs/operations.md, "Read replicas"): a pool per standby,
/// each checked every `Options.checkInterval` (reachable, in recovery, its lag behind the
/// primary), and the choice of the server for each read.
///
/// A read that must be at least as new as a position (a consistency token, or the user's
/// own recent write) goes to a standby that has replayed past it, else waits up to
/// `Options.wait` for one to, else goes to the primary. A read without one goes to any usable
/// standby. A standby down, lagging, promoted or failing a read is never an error: its reads
/// go to the primary. As a `Service` it runs the standbys' pools and the checks.
public final class StandbyReads: Service, Sendable {
    public struct Options: Sendable {
        /// The longest a read waits for a standby to replay a position it must show, before
        /// it goes to the primary (`RECEIPTS_REPLICA_WAIT_MS`, default 20 ms).
        public var wait: Duration = .milliseconds(20)
        /// A standby further behind the primary than this serves nothing until it catches up
        /// (`RECEIPTS_REPLICA_MAX_LAG_MS`, default 2 s).
        public var maximumLag: Duration = .seconds(2)
        /// How often the primary's position and every standby are checked (default 100 ms).
        public var checkInterval: Duration = .milliseconds(100)
        /// How long a check may take before its standby counts as unreachable (default 1 s).
        public var checkTimeout: Duration = .seconds(1)

        public init() {}
    }

    /// How a read was served.
    public struct Route: Sendable {
        public var source: ReadSource
        /// Whether it waited for a standby to replay its position (whoever served it then).
        public var waited: Bool
    }

    /// A standby's state, for `/metrics`.
    public struct StandbyState: Sendable {
        public var server: String
        public var isUsable: Bool
        /// Its lag at the last check; nil while unknown (unreachable, promoted).
        public var lag: Duration?
    }

    let standbys: [Standby]
    private let primary: PostgresConnectionPool
    private let options: Options
    private let logger: Logger
    private let history: NIOLockedValueBox<PrimaryPositionHistory>
    private let nextStandby = NIOLockedValueBox(0)

    /// - Parameters:
    ///   - standbys: each standby's server name and sessions (as `PostgresConfiguration.eachHost()`
    ///     gives them), set up as the primary's are.
    ///   - poolOptions: each standby pool's options (the primary's: its size, timeouts).
    public init(
        standbys: [(server: String, configuration: PostgresConfiguration)],
        poolOptions: PostgresConnectionPool.Options,
        primary: PostgresConnectionPool,
        options: Options = .init(),
        logger: Logger
    ) {
        self.standbys = standbys.map { standby in
            Standby(server: standby.server, pool: PostgresConnectionPool(configuration: standby.configuration, options: poolOptions, logger: logger))
        }
        self.primary = primary
        self.options = options
        self.logger = logger
        // Room for a standby lagging a little past the cut-off to read as lagging.
        self.history = NIOLockedValueBox(PrimaryPositionHistory(span: options.maximumLag * 2 + options.checkInterval * 10))
    }

    public var states: [StandbyState] {
        self.standbys.map { standby in
            StandbyState(server: standby.server, isUsable: standby.isUsable(maximumLag: self.options.maximumLag), lag: standby.health.lag)
        }
    }

    /// Runs `read` on a standby that shows everything up to `position` (any usable one when
    /// nil), or on the primary. `read` gets the standby's pool, or nil for the primary.
    public func read<Result>(
        atLeast position: WALPosition?,
        _ read: (_ standby: PostgresConnectionPool?) async throws -> Result
    ) async throws -> (Result, Route) {
        var waited = false
        var standby = self.choose(showing: position)
        if standby == nil, let position, self.standbys.contains(where: { $0.isUsable(maximumLag: self.options.maximumLag) }) {
            waited = true
            standby = await self.waitForStandby(showing: position)
        }
        if let standby {
            do {
                // Half the request's time at most, so that the primary has the rest if it fails.
                let result = try await PostgresDeadline.within(Self.half(of: PostgresDeadline.current)) {
                    try await read(standby.pool)
                }
                return (result, Route(source: .replica, waited: waited))
            } catch {
                standby.failed()
                self.logger.warning(
                    "a read on a standby failed; reading from the primary",
                    metadata: ["postgres.server": "\(standby.server)", "error": "\(error)"])
            }
        }
        return (try await read(nil), Route(source: .primary, waited: waited))
    }

    /// A usable standby that has replayed `position` (any usable one when nil), taking turns.
    private func choose(showing position: WALPosition?) -> Standby? {
        let count = self.standbys.count
        guard count > 0 else { return nil }
        let first = self.nextStandby.withLockedValue { next in
            defer { next = (next + 1) % count }
            return next
        }
        for offset in 0..<count {
            let standby = self.standbys[(first + offset) % count]
            guard standby.isUsable(maximumLag: self.options.maximumLag) else { continue }
            if let position, !standby.hasReplayed(position) { continue }
            return standby
        }
        return nil
    }

    /// Asks the usable standbys how far they have replayed (shared probes, a millisecond
    /// apart) until one shows `position`, for at most `Options.wait`.
    private func waitForStandby(showing position: WALPosition) async -> Standby? {
        let deadline = ContinuousClock.now + self.options.wait
        return await PostgresDeadline.within(TimeAmount(self.options.wait)) {
            while ContinuousClock.now < deadline {
                let usable = self.standbys.filter { $0.isUsable(maximumLag: self.options.maximumLag) }
                if usable.isEmpty { return nil }
                for standby in usable {
                    guard let replayed = try? await standby.replay.positionAfterNow() else { continue }
                    standby.replayed(replayed)
                    if replayed >= position { return standby }
                }
                try? await Task.sleep(for: .milliseconds(1))
            }
            return nil
        }
    }

    private static func half(of deadline: NIODeadline?) -> TimeAmount {
        guard let deadline else { return .seconds(5) }
        return .nanoseconds(max(0, (deadline - NIODeadline.now()).nanoseconds / 2))
    }

    // MARK: - Service

    /// Runs the standbys' pools and checks them until graceful shutdown or cancellation.
    public func run() async throws {
        await withDiscardingTaskGroup { group in
            for standby in self.standbys {
                group.addTask { try? await standby.pool.run() }
            }
            group.addTask {
                await cancelWhenGracefulShutdown {
                    while !Task.isCancelled {
                        await self.check()
                        try? await Task.sleep(for: self.options.checkInterval)
                    }
                }
            }
        }
    }

    /// Samples the primary's position, then reads each standby's replay position.
    func check() async {
        let timeout = TimeAmount(self.options.checkTimeout)
        if let primaryPosition = try? await PostgresDeadline.within(timeout, { try await PositionProbe.read(on: self.primary) }) {
            self.history.withLockedValue { $0.record(primaryPosition, at: .now) }
        }
        await withDiscardingTaskGroup { group in
            for standby in self.standbys {
                group.addTask {
                    let replayed = try? await PostgresDeadline.within(timeout) { try await PositionProbe.readReplay(on: standby.pool) }
                    let lag = replayed.flatMap { replayed in self.history.withLockedValue { $0.lag(of: replayed, now: .now) } }
                    let wasUsable = standby.isUsable(maximumLag: self.options.maximumLag)
                    standby.checked(replayed: replayed, lag: lag)
                    let isUsable = standby.isUsable(maximumLag: self.options.maximumLag)
                    if wasUsable != isUsable {
                        let why = replayed == nil ? "unreachable or not in recovery" : "lag \(lag.map { "\($0)" } ?? "unknown")"
                        self.logger.log(
                            level: isUsable ? .info : .warning,
                            isUsable ? "a standby serves reads again" : "a standby serves no reads (\(why))",
                            metadata: ["postgres.server": "\(standby.server)"])
                    }
                }
            }
        }
    }
}
