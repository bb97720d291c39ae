import Foundation
import Postgres
import ReceiptsStore
import TestSupport
import Testing

@Suite("Migrations")
struct MigrationTests {
    let migrationsDirectory = TestDatabase.packageRoot.appendingPathComponent("sql/migrations")

    func migrate(_ url: String) async throws -> TestDatabase.ProcessResult {
        try await TestDatabase.run(
            TestDatabase.receiptsdExecutable,
            arguments: ["migrate"],
            environment: ["DATABASE_URL": url, "RECEIPTS_MIGRATIONS_DIR": migrationsDirectory.path, "LOG_LEVEL": "warning"]
        )
    }

    func withConnection<Result>(to url: String, _ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        let connection = try await PostgresConnection.connect(
            to: PostgresConfiguration(connectionString: url),
            logger: TestDatabase.logger
        )
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }

    struct AppliedMigration: Equatable {
        var version: Int
        var appliedAt: Date
    }

    func appliedMigrations(_ url: String) async throws -> [AppliedMigration] {
        try await withConnection(to: url) { connection in
            try await connection.query("SELECT version, applied_at FROM receipts.schema_migrations ORDER BY version")
                .map { AppliedMigration(version: try $0.decode(column: 0), appliedAt: try $0.decode(column: 1)) }
        }
    }

    @Test("receiptsd migrate twice: the second run changes nothing")
    func migrateTwice() async throws {
        let expected = try Migration.load(from: migrationsDirectory).map(\.version)
        try await TestDatabase.withFreshDatabase { url in
            let first = try await migrate(url)
            #expect(first.output.hasPrefix("Applied \(expected.count) migration(s)"))
            let afterFirst = try await appliedMigrations(url)
            #expect(afterFirst.map(\.version) == expected)

            let second = try await migrate(url)
            #expect(second.output == "Database is up to date.")
            #expect(try await appliedMigrations(url) == afterFirst)
        }
    }

    /// A script that changes is applied over the objects its previous version made: every
    /// script must run again over itself (a function whose arguments changed drops the old
    /// signature and creates or replaces the new one).
    @Test("every script applies again over what it made, as when it changes")
    func scriptsApplyAgain() async throws {
        try await TestDatabase.withFreshDatabase { url in
            _ = try await migrate(url)
            try await withConnection(to: url) { connection in
                _ = try await connection.execute("UPDATE receipts.schema_scripts SET checksum = 'changed'")
            }
            let again = try await migrate(url)
            let scripts = try RepeatableScript.load(besides: migrationsDirectory)
            #expect(again.output.contains("Applied \(scripts.count) script(s)"), "\(again.output)")
            #expect(try await migrate(url).output == "Database is up to date.")
        }
    }

    @Test("two concurrent runs apply each migration once")
    func concurrentRuns() async throws {
        let expected = try Migration.load(from: migrationsDirectory).map(\.version)
        try await TestDatabase.withFreshDatabase { url in
            let results = try await withThrowingTaskGroup(of: TestDatabase.ProcessResult.self) { group in
                for _ in 0..<2 {
                    group.addTask { try await migrate(url) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.allSatisfy { $0.status == 0 })
            #expect(results.filter { $0.output.hasPrefix("Applied") }.count == 1)
            #expect(results.filter { $0.output == "Database is up to date." }.count == 1)
            #expect(try await appliedMigrations(url).map(\.version) == expected)
        }
    }

    @Test("a replica starting against an up-to-date database does not wait for the migration lock")
    func upToDateNeedsNoLock() async throws {
        try await TestDatabase.withFreshDatabase { url in
            _ = try await migrate(url)
            try await withConnection(to: url) { holder in
                // Another runner holds the lock (MigrationRunner.advisoryLockKey) for as long
                // as it likes; a watchdog lets go after 15 s so that a failure ends.
                try await holder.execute("SELECT pg_advisory_lock($1)", [7_305_146_321_220_001])
                let watchdog = Task {
                    try await Task.sleep(for: .seconds(15))
                    try await holder.execute("SELECT pg_advisory_unlock($1)", [7_305_146_321_220_001])
                }
                let started = ContinuousClock.now
                let second = try await migrate(url)
                watchdog.cancel()
                #expect(second.output == "Database is up to date.")
                #expect(ContinuousClock.now - started < .seconds(10), "waited \(ContinuousClock.now - started) for the lock")
            }
        }
    }

    /// (The runner's bookkeeping and the database's event histories hold no tenant's data.)
    @Test("every table and column of the schema carries a comment, and tenant tables have RLS")
    func schemaIsDocumentedAndIsolated() async throws {
        try await TestDatabase.withFreshDatabase { url in
            _ = try await migrate(url)
            try await withConnection(to: url) { connection in
                let uncommentedTables = try await connection.query(
                    """
                    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = 'receipts' AND c.relkind = 'r' AND obj_description(c.oid, 'pg_class') IS NULL
                    """
                ).map { try $0.decode(String.self, column: 0) }
                #expect(uncommentedTables == [])

                let tablesWithoutRLS = try await connection.query(
                    """
                    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = 'receipts' AND c.relkind = 'r'
                      AND c.relname NOT IN ('schema_migrations', 'schema_scripts', 'event_histories')
                      AND NOT c.relrowsecurity
                    """
                ).map { try $0.decode(String.self, column: 0) }
                #expect(tablesWithoutRLS == [])

                let serviceRole = try await connection.query(
                    "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = 'receipts_service'"
                )
                #expect(try serviceRole[0].decode(Bool.self, column: 0) == false)
                #expect(try serviceRole[0].decode(Bool.self, column: 1) == false)
            }
        }
    }

    @Test("a migration that fails leaves nothing behind and is not recorded")
    func failedMigrationRollsBack() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(TestDatabase.uniqueName("migrations"))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "CREATE TABLE receipts.first_table (id int);".write(
            to: directory.appendingPathComponent("0001_first.sql"), atomically: true, encoding: .utf8)
        try "CREATE TABLE receipts.second_table (id int); SELECT * FROM no_such_table;".write(
            to: directory.appendingPathComponent("0002_broken.sql"), atomically: true, encoding: .utf8)

        try await TestDatabase.withFreshDatabase { url in
            try await withConnection(to: url) { connection in
                let runner = MigrationRunner(migrations: try Migration.load(from: directory), logger: TestDatabase.logger)
                let error = await #expect(throws: PostgresError.self) { try await runner.applyPending(on: connection) }
                #expect(error?.sqlState == PostgresError.SQLState.undefinedTable)
                #expect(try await runner.appliedVersions(on: connection) == [1])
                let secondTable = try await connection.query("SELECT to_regclass('receipts.second_table') IS NULL")
                #expect(try secondTable.scalar(Bool.self))
            }
        }
    }

    @Test("badly named migration files are refused")
    func badFileName() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(TestDatabase.uniqueName("migrations"))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "SELECT 1;".write(to: directory.appendingPathComponent("first.sql"), atomically: true, encoding: .utf8)
        #expect(throws: Migration.LoadingError.self) { try Migration.load(from: directory) }
    }
}
