import ArgumentParser
import Logging
import Postgres
import ReceiptsStore

/// `receiptsd migrate`: applies pending migrations and exits.
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending SQL migrations and changed functions, triggers and views (a second run does nothing)."
    )

    func run() async throws {
        let environment = Environment()
        let logger = makeLogger(level: environment.logLevel())
        let configuration = PostgresConfiguration(
            connectionString: try environment.databaseURL(logger: logger),
            applicationName: "receiptsd-migrate"
        )
        let runner = try MigrationRunner(directory: environment.migrationsDirectory(), logger: logger)
        let applied = try await runner.applyPending(to: configuration)
        guard !applied.isEmpty else { return print("Database is up to date.") }
        var lines: [String] = []
        if !applied.migrations.isEmpty {
            lines.append("Applied \(applied.migrations.count) migration(s): " + applied.migrations.map { "\($0.version)_\($0.name)" }.joined(separator: ", "))
        }
        if !applied.scripts.isEmpty {
            lines.append("Applied \(applied.scripts.count) script(s): " + applied.scripts.map(\.path).joined(separator: ", "))
        }
        print(lines.joined(separator: "\n"))
    }
}
