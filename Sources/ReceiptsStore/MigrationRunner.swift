import Logging
import Postgres

/// Applies pending migrations, each once, in order, each in its own transaction.
///
/// A session-level advisory lock serialises runners, so replicas that start together do
/// not race: the second waits, then finds nothing left to do. Applied migrations are
/// recorded in `receipts.schema_migrations` with an MD5 of their SQL, so an edited
/// migration that already ran is reported instead of silently ignored.
///
/// Each migration's transaction sets `receipts.all_tenants` (see
/// sql/migrations/0017_forced_row_security.sql): row-level security is forced on the tenant
/// tables, so a migration that moves rows of every tenant, run as the tables' owner, would
/// otherwise see none.
public struct MigrationRunner: Sendable {
    /// Key of the advisory lock held while migrating (any fixed number unique to us).
    static let advisoryLockKey = 7_305_146_321_220_001

    public let migrations: [Migration]
    private let logger: Logger

    public init(migrations: [Migration], logger: Logger) {
        self.migrations = migrations
        self.logger = logger
    }

    /// Applies what is pending and returns it (empty when the database is up to date).
    @discardableResult
    public func applyPending(on connection: PostgresConnection) async throws -> [Migration] {
        try await connection.execute("SELECT pg_advisory_lock($1)", [Self.advisoryLockKey])
        do {
            let applied = try await self.applyPendingWhileLocked(on: connection)
            try await connection.execute("SELECT pg_advisory_unlock($1)", [Self.advisoryLockKey])
            return applied
        } catch {
            if connection.isOpen {
                _ = try? await connection.execute("SELECT pg_advisory_unlock($1)", [Self.advisoryLockKey])
            }
            throw error
        }
    }

    /// Applies what is pending over a connection of its own, closed afterwards.
    @discardableResult
    public func applyPending(to database: PostgresConfiguration) async throws -> [Migration] {
        let connection = try await PostgresConnection.connect(to: database, logger: self.logger)
        do {
            let applied = try await self.applyPending(on: connection)
            await connection.close()
            return applied
        } catch {
            await connection.close()
            throw error
        }
    }

    /// The versions recorded as applied.
    public func appliedVersions(on connection: PostgresConnection) async throws -> [Int] {
        try await self.createBookkeeping(on: connection)
        let rows = try await connection.query("SELECT version FROM receipts.schema_migrations ORDER BY version")
        return try rows.map { try $0.decode(Int.self, column: 0) }
    }

    private func applyPendingWhileLocked(on connection: PostgresConnection) async throws -> [Migration] {
        let applied = Set(try await self.appliedVersions(on: connection))
        try await self.warnAboutEditedMigrations(on: connection)

        var newlyApplied: [Migration] = []
        for migration in self.migrations where !applied.contains(migration.version) {
            self.logger.info(
                "applying migration",
                metadata: ["receipts.migration": "\(migration.version)_\(migration.name)"]
            )
            try await connection.withTransaction { connection in
                try await connection.execute(
                    "SELECT set_config($1, $2, true)", [ReceiptsStore.allTenants.name, ReceiptsStore.allTenants.value])
                try await connection.executeScript(migration.sql)
                try await connection.execute(
                    "INSERT INTO receipts.schema_migrations (version, name, checksum) VALUES ($1, $2, md5($3))",
                    [migration.version, migration.name, migration.sql]
                )
            }
            newlyApplied.append(migration)
        }
        return newlyApplied
    }

    private func createBookkeeping(on connection: PostgresConnection) async throws {
        try await connection.executeScript(
            """
            CREATE SCHEMA IF NOT EXISTS receipts;
            CREATE TABLE IF NOT EXISTS receipts.schema_migrations (
                version    integer     PRIMARY KEY,
                name       text        NOT NULL,
                checksum   text        NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            );
            COMMENT ON TABLE receipts.schema_migrations IS
                'Migrations of sql/migrations applied to this database (receiptsd migrate), with the MD5 of their SQL.';
            """
        )
    }

    private func warnAboutEditedMigrations(on connection: PostgresConnection) async throws {
        let rows = try await connection.query(
            """
            SELECT applied.version, applied.name
            FROM unnest($1::int8[], $2::text[]) AS file (version, sql)
            JOIN receipts.schema_migrations AS applied USING (version)
            WHERE applied.checksum <> md5(file.sql)
            """,
            [self.migrations.map(\.version), self.migrations.map(\.sql)]
        )
        for row in rows {
            let version = try row.decode(Int.self, column: 0)
            let name = try row.decode(String.self, column: 1)
            self.logger.warning(
                "an applied migration was edited afterwards; its changes were not applied",
                metadata: ["receipts.migration": "\(version)_\(name)"]
            )
        }
    }
}
