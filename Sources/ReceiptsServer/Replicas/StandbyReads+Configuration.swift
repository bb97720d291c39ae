import Logging
import Postgres
import ReceiptsStore

extension StandbyReads {
    /// The standbys `url` names (libpq's multi-host form), each opened as the primary's
    /// sessions are (`database`'s application name, the service's role and settings).
    ///
    /// - Throws: `PostgresError` when `url` is not a connection string libpq reads.
    convenience init(
        _ replicas: ReceiptsConfiguration.Replicas,
        url: String,
        poolOptions: PostgresConnectionPool.Options,
        sessionsLike database: PostgresConfiguration,
        primary: PostgresConnectionPool,
        databaseTimeout: Duration,
        logger: Logger
    ) throws {
        var standbyDatabase = database
        standbyDatabase.connectionString = url
        let standbys = try standbyDatabase.eachHost().map { standby in
            (server: standby.server, configuration: ReceiptsStore.serviceSessions(of: standby.configuration, timeout: databaseTimeout))
        }
        var options = StandbyReads.Options()
        options.wait = replicas.wait
        options.maximumLag = replicas.maximumLag
        options.checkInterval = replicas.checkInterval
        self.init(standbys: standbys, poolOptions: poolOptions, primary: primary, options: options, logger: logger)
        logger.info("reads may go to standbys", metadata: ["postgres.standbys": "\(standbys.map(\.server))"])
    }
}
