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
            host: self.host ?? environment["RECEIPTS_HOST"] ?? "127.0.0.1",
            port: try self.port ?? environment.integer("RECEIPTS_PORT", default: 8080),
            databaseURL: try environment.databaseURL(logger: logger),
            adminToken: environment["RECEIPTS_ADMIN_TOKEN"],
            databasePoolSize: try environment.integer("RECEIPTS_DATABASE_POOL_SIZE", default: 10),
            runMigrations: !self.noMigrate,
            migrationsDirectory: environment.migrationsDirectory(),
            eventRetentionSeconds: try environment.integer("RECEIPTS_EVENT_RETENTION_SECONDS", default: 7 * 24 * 3600),
            streamMaximumLag: try environment.integer("RECEIPTS_STREAM_MAX_LAG", default: 5000),
            notifiesOtherInstances: try environment.boolean("RECEIPTS_NOTIFY_OTHER_INSTANCES", default: true),
            shutdownGracePeriod: .seconds(try environment.integer("RECEIPTS_SHUTDOWN_GRACE_SECONDS", default: 10, in: 1...3600)),
            maximumStreamsPerUser: try environment.integer("RECEIPTS_MAX_STREAMS_PER_USER", default: 20, in: 1...100_000),
            maximumStreamsPerTenant: try environment.integer("RECEIPTS_MAX_STREAMS_PER_TENANT", default: 10_000, in: 1...10_000_000),
            databaseTimeout: .seconds(try environment.integer("RECEIPTS_DATABASE_TIMEOUT_SECONDS", default: 5, in: 1...600))
        )
        configuration.webhooks.allowsPrivateNetworks = try environment.boolean("RECEIPTS_WEBHOOK_ALLOW_PRIVATE_NETWORKS", default: false)
        configuration.webhooks.retryBase = .milliseconds(
            try environment.integer("RECEIPTS_WEBHOOK_RETRY_BASE_MILLISECONDS", default: 1000, in: 1...300_000))
        configuration.webhooks.lease = .seconds(try environment.integer("RECEIPTS_WEBHOOK_LEASE_SECONDS", default: 20, in: 11...3600))
        if let origins = environment["RECEIPTS_ALLOWED_ORIGINS"] {
            do {
                configuration.allowedOrigins = try AllowedOrigins(parsing: origins)
            } catch {
                throw ConfigurationError("RECEIPTS_ALLOWED_ORIGINS: \(error.description)")
            }
        }
        if try environment.boolean("RECEIPTS_DEMO", default: false) {
            configuration.demoTenant = environment["RECEIPTS_DEMO_TENANT"] ?? "demo"
            logger.notice(
                "demo page on: it hands out tokens of the demo tenant's demo users to anyone who can reach it",
                metadata: ["receipts.tenant_id": "\(configuration.demoTenant!)", "path": "/demo"])
        }
        let app = try await buildApplication(configuration, logger: logger)
        try await ServiceGroup(configuration: .receiptsd(running: app, gracePeriod: configuration.shutdownGracePeriod, logger: logger)).run()
    }
}

extension ServiceGroupConfiguration {
    /// `receiptsd serve`'s lifecycle: SIGTERM or SIGINT starts a graceful shutdown (the
    /// listener stops accepting, streams close with their reason, requests in flight
    /// finish), and the process is gone within `gracePeriod` whatever clients do. Graceful
    /// shutdown gets the period but its last quarter (at most one second); then the app's
    /// tasks are cancelled, which closes every connection left; should cancellation itself
    /// hang past the period, ServiceLifecycle ends the process.
    static func receiptsd(running app: some ApplicationProtocol, gracePeriod: Duration, logger: Logger) -> ServiceGroupConfiguration {
        var configuration = ServiceGroupConfiguration(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
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
