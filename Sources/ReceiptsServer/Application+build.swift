import Hummingbird
import Logging
import Postgres
import ReceiptsStore

/// Assembles the service: database pool, migrations, routes.
///
/// `receiptsd serve` runs what this returns; tests build the same application.
public func buildApplication(
    _ configuration: ReceiptsConfiguration,
    logger: Logger
) async throws -> some ApplicationProtocol {
    let pool = PostgresConnectionPool(
        configuration: PostgresConfiguration(connectionString: configuration.databaseURL, applicationName: "receiptsd"),
        options: .init(maximumConnections: configuration.databasePoolSize),
        logger: logger
    )
    let router = buildRouter(pool: pool)
    var app = Application(
        router: router,
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port),
            serverName: "receiptsd"
        ),
        services: [pool],
        logger: logger
    )
    if configuration.runMigrations {
        let migrations = try Migration.load(from: configuration.migrationsDirectory)
        app.beforeServerStarts {
            let runner = MigrationRunner(migrations: migrations, logger: logger)
            try await pool.withConnection { connection in
                _ = try await runner.applyPending(on: connection)
            }
        }
    }
    return app
}

/// The HTTP routes.
func buildRouter(pool: PostgresConnectionPool) -> Router<BasicRequestContext> {
    let router = Router(context: BasicRequestContext.self)
    router.add(middleware: ErrorMiddleware())
    HealthController(pool: pool).addRoutes(to: router)
    return router
}
