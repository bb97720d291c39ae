import ArgumentParser
import Hummingbird
import Logging
import ReceiptsServer
import ServiceLifecycle
import UnixSignals

/// `receiptsd serve`: applies pending migrations and serves the HTTP API.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the HTTP service.")

    @Option(help: "Listen address (default: RECEIPTS_HOST or 127.0.0.1).")
    var host: String?

    @Option(help: "Listen port (default: RECEIPTS_PORT or 8080).")
    var port: Int?

    @Flag(help: "Do not apply pending migrations at start.")
    var noMigrate = false

    func run() async throws {
        let environment = Environment()
        MemoryAllocator.keepLargeBlocks(environment)
        let logger = makeLogger(level: environment.logLevel())
        var configuration = ReceiptsConfiguration(
            host: self.host ?? environment.string(.host)!,
            port: try self.port ?? environment.integer(.port),
            databaseURL: try environment.databaseURL(logger: logger),
            adminToken: environment[.adminToken],
            databasePoolSize: try environment.integer(.databasePoolSize),
            runMigrations: !self.noMigrate,
            migrationsDirectory: environment.migrationsDirectory(),
            eventRetentionSeconds: try environment.integer(.eventRetentionSeconds),
            streamMaximumLag: try environment.integer(.streamMaximumLag),
            notifiesOtherInstances: try environment.boolean(.notifyOtherInstances),
            shutdownGracePeriod: .seconds(try environment.integer(.shutdownGraceSeconds)),
            maximumStreamsPerUser: try environment.integer(.maximumStreamsPerUser),
            maximumStreamsPerTenant: try environment.integer(.maximumStreamsPerTenant),
            databaseTimeout: .seconds(try environment.integer(.databaseTimeoutSeconds))
        )
        let fileLimit = FileLimit.raiseToHardLimit()
        configuration.maximumConnections = try environment.optionalInteger(.maximumConnections)
            ?? ConnectionCap.defaultMaximum(fileLimit: fileLimit, databasePoolSize: configuration.databasePoolSize)
        ConnectionCap.warnIfTooHigh(configuration.maximumConnections, fileLimit: fileLimit, databasePoolSize: configuration.databasePoolSize, logger: logger)
        configuration.fairness.saturation = try environment.integer(.maximumRequestsInFlight)
        configuration.fairness.tenantMaximum = try environment.integer(.tenantMaximumRequestsInFlight)
        configuration.fairness.sharedConnections = try environment.integer(.databaseSharedConnections)
        configuration.fairness.defaultRequestsPerSecond = try environment.optionalInteger(.tenantRequestsPerSecond)
        configuration.fairness.defaultBurst = try environment.optionalInteger(.tenantBurst)
        configuration.fairness.fanOutLoopShare = try environment.integer(.streamFanOutShare)
        configuration.webhooks.allowsPrivateNetworks = try environment.boolean(.webhookAllowPrivateNetworks)
        configuration.replicas.databaseURL = environment.string(.replicaDatabaseURL)
        configuration.replicas.wait = .milliseconds(try environment.integer(.replicaWaitMilliseconds))
        configuration.replicas.maximumLag = .milliseconds(try environment.integer(.replicaMaximumLagMilliseconds))
        configuration.webhooks.retryBase = .milliseconds(try environment.integer(.webhookRetryBaseMilliseconds))
        configuration.webhooks.lease = .seconds(try environment.integer(.webhookLeaseSeconds))
        configuration.imports.maximumBytes = try environment.integer(.importMaximumBytes)
        if let origins = environment[.allowedOrigins] {
            do {
                configuration.allowedOrigins = try AllowedOrigins(parsing: origins)
            } catch {
                throw ConfigurationError("RECEIPTS_ALLOWED_ORIGINS: \(error.description)")
            }
        }
        if try environment.boolean(.demo) {
            configuration.demoTenant = environment.string(.demoTenant)
            logger.notice(
                "demo page on: it hands out tokens of the demo tenant's demo users to anyone who can reach it",
                metadata: ["receipts.tenant_id": "\(configuration.demoTenant!)", "path": "/demo"])
        }
        // Before the application is built: its parts read whether spans are made.
        let tracing = try TracingExport.start(endpoint: environment.string(.otelEndpoint), logger: logger)
        let app = try await buildApplication(configuration, logger: logger)
        try await ServiceGroup(
            configuration: .receiptsd(running: app, gracePeriod: configuration.shutdownGracePeriod, logger: logger, exporting: tracing)
        ).run()
    }
}

extension ServiceGroupConfiguration {
    /// `receiptsd serve`'s lifecycle: SIGTERM or SIGINT starts a graceful shutdown (the
    /// listener stops accepting, streams close with their reason, requests in flight
    /// finish), and the process is gone within `gracePeriod` whatever clients do. Graceful
    /// shutdown gets the period but its last quarter (at most one second); then the app's
    /// tasks are cancelled, which closes every connection left; should cancellation itself
    /// hang past the period, ServiceLifecycle ends the process.
    /// With `exporting` (the traces' exporter), it runs first and stops last, after the app,
    /// so the app's last spans are flushed.
    static func receiptsd(
        running app: some ApplicationProtocol, gracePeriod: Duration, logger: Logger, exporting tracing: (any Service)? = nil
    ) -> ServiceGroupConfiguration {
        let services: [any Service] = (tracing.map { [$0] } ?? []) + [app]
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        let cancellation = min(.seconds(1), gracePeriod / 4)
        configuration.maximumGracefulShutdownDuration = gracePeriod - cancellation
        configuration.maximumCancellationDuration = cancellation
        return configuration
    }
}

/// A logger writing to standard error at `level`.
func makeLogger(level: Logger.Level) -> Logger {
    LoggingSystem.bootstrap(StandardErrorLogHandler.init)
    var logger = Logger(label: "receiptsd")
    logger.logLevel = level
    return logger
}
