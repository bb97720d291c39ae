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
    let database = PostgresConfiguration(connectionString: configuration.databaseURL, applicationName: "receiptsd")
    // Tenant work runs as receipts_service, which row-level security applies to.
    var serviceDatabase = database
    serviceDatabase.role = ReceiptsStore.serviceRole
    let pool = PostgresConnectionPool(
        configuration: serviceDatabase,
        options: .init(maximumConnections: configuration.databasePoolSize),
        logger: logger
    )
    let router = buildRouter(
        configuration: configuration,
        pool: pool,
        store: ReceiptsStore(pool: pool, logger: logger),
        metrics: ServiceMetrics()
    )
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
            // As the login role (the tables' owner), not receipts_service.
            let connection = try await PostgresConnection.connect(to: database, logger: logger)
            do {
                try await MigrationRunner(migrations: migrations, logger: logger).applyPending(on: connection)
            } catch {
                await connection.close()
                throw error
            }
            await connection.close()
        }
    }
    return app
}

/// The HTTP routes and their middleware.
public func buildRouter(
    configuration: ReceiptsConfiguration,
    pool: PostgresConnectionPool,
    store: ReceiptsStore,
    metrics: ServiceMetrics
) -> Router<ReceiptsRequestContext> {
    let router = Router(context: ReceiptsRequestContext.self)
    router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
    router.add(middleware: ErrorMiddleware())
    router.add(middleware: BodyLimitMiddleware())

    HealthController(pool: pool).addRoutes(to: router)
    OperationsController(metrics: metrics, pool: pool).addRoutes(to: router)

    let userTokens = UserTokens(store: store)
    AdminController(registration: TenantRegistration(store: store)).addRoutes(
        to: router.group("admin/v1").add(middleware: AdminAuthenticationMiddleware(adminToken: configuration.adminToken))
    )
    let api = router.group("v1").add(
        middleware: AuthenticationMiddleware(authenticator: Authenticator(store: store, userTokens: userTokens))
    )
    TokenController(userTokens: userTokens).addRoutes(to: api)
    ChatController(store: store).addRoutes(to: api)
    MessageController(store: store).addRoutes(to: api)
    MarkingController(store: store).addRoutes(to: api)
    UserController(store: store).addRoutes(to: api)
    return router
}
