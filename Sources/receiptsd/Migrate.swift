import ArgumentParser
import Logging
import Postgres
import ReceiptsStore

/// `receiptsd migrate`: applies pending migrations and exits.
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending SQL migrations (a second run does nothing)."
    )

    func run() async throws {
        let environment = Environment()
        let logger = makeLogger(level: environment.logLevel())
        let migrations = try Migration.load(from: environment.migrationsDirectory())
        let configuration = PostgresConfiguration(
            connectionString: try environment.databaseURL(logger: logger),
            applicationName: "receiptsd-migrate"
        )
        let applied = try await MigrationRunner(migrations: migrations, logger: logger).applyPending(to: configuration)
        print(applied.isEmpty ? "Database is up to date." : "Applied \(applied.count) migration(s): " + applied.map { "\($0.version)_\($0.name)" }.joined(separator: ", "))
    }
}
