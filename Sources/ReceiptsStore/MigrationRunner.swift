import Foundation
import Logging
import Postgres

/// Brings a database to the schema of `sql/`: pending migrations first, each once, in order,
/// each in its own transaction; then every repeatable script (`sql/functions`, `sql/views`,
/// `sql/triggers`) that is new or changed since it was last applied, in their stated order
/// (`RepeatableScript.folders`), all in one transaction.
///
/// A session-level advisory lock serialises runners, so replicas that start together do
/// not race: the second waits, then finds nothing left to do. Applied migrations are
/// recorded in `receipts.schema_migrations` with an MD5 of their SQL, so an edited
/// migration that already ran is reported instead of silently ignored; applied scripts in
/// `receipts.schema_scripts` with theirs, which is how a changed script is found. A
/// migration must not call a function of `sql/functions`: the scripts run after the
/// migrations, so it would find the previous version of that function, or none.
///
/// Every transaction sets `receipts.all_tenants` (see "Row-level security" in
/// sql/migrations/0001_baseline.sql): row-level security is forced on the tenant tables, so a
/// migration that moves rows of every tenant, run as the tables' owner, would otherwise see
/// none.
///
/// What a new database holds once migrated is in
/// `Tests/ReceiptsStoreTests/Snapshots/schema.txt` (SchemaSnapshotTests), so a change to the
/// schema shows in review as a change of that file.
public struct MigrationRunner: Sendable {
    /// Key of the advisory lock held while migrating (any fixed number unique to us).
    static let advisoryLockKey = 7_305_146_321_220_001

    public let migrations: [Migration]
    public let scripts: [RepeatableScript]
    let logger: Logger

    public init(migrations: [Migration], scripts: [RepeatableScript] = [], logger: Logger) {
        self.migrations = migrations
        self.scripts = scripts
        self.logger = logger
    }

    /// The migrations of `migrationsDirectory` (`sql/migrations`) and the repeatable scripts
    /// of the folders beside it.
    public init(directory migrationsDirectory: URL, logger: Logger) throws {
        self.init(
            migrations: try Migration.load(from: migrationsDirectory),
            scripts: try RepeatableScript.load(besides: migrationsDirectory),
            logger: logger
        )
    }

    /// What one run applied.
    public struct Applied: Sendable {
        public var migrations: [Migration] = []
        public var scripts: [RepeatableScript] = []

        public var isEmpty: Bool { self.migrations.isEmpty && self.scripts.isEmpty }
    }

    /// Applies what is pending and returns it (empty when the database is up to date).
    @discardableResult
    public func applyPending(on connection: PostgresConnection) async throws -> Applied {
        if await self.isUpToDate(on: connection) { return Applied() }
        try await connection.execute("SELECT pg_advisory_lock(\(Self.advisoryLockKey))")
        do {
            let applied = try await self.applyPendingWhileLocked(on: connection)
            try await connection.execute("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))")
            return applied
        } catch {
            if connection.isOpen {
                _ = try? await connection.execute("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))")
            }
            throw error
        }
    }

    /// Applies what is pending over a connection of its own, closed afterwards.
    @discardableResult
    public func applyPending(to database: PostgresConfiguration) async throws -> Applied {
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
        return try rows.map { try $0.decode(Int.self, column: "version") }
    }

    /// The scripts recorded as applied, with the MD5 of the text that was.
    public func appliedScripts(on connection: PostgresConnection) async throws -> [String: String] {
        try await self.createBookkeeping(on: connection)
        let rows = try await connection.query("SELECT path, checksum FROM receipts.schema_scripts")
        var applied: [String: String] = [:]
        for (path, checksum) in try rows.decode((String, String).self) { applied[path] = checksum }
        return applied
    }

    /// Whether every migration is recorded with the checksum of its file and every script
    /// with the checksum of its text: one read, without the lock, so that replicas (and the
    /// test suite's many services) starting against a migrated database do not queue behind
    /// each other. Anything else, a database without the bookkeeping tables included, answers
    /// false and goes the locked way, which does the work or reports what is wrong.
    private func isUpToDate(on connection: PostgresConnection) async -> Bool {
        let rows = try? await connection.query(
            """
            SELECT (
                SELECT count(*)
                FROM unnest(\(self.migrations.map(\.version))::int8[], \(self.migrations.map(\.sql))::text[]) AS file (version, sql)
                JOIN receipts.schema_migrations AS applied USING (version)
                WHERE applied.checksum = md5(file.sql)
            ) = cardinality(\(self.migrations.map(\.version))::int8[])
            AND NOT EXISTS (
                SELECT
                FROM unnest(\(self.scripts.map(\.path))::text[], \(self.scripts.map(\.sql))::text[]) AS file (path, sql)
                LEFT JOIN receipts.schema_scripts AS applied USING (path)
                WHERE applied.checksum IS DISTINCT FROM md5(file.sql)
            )
            """
        )
        return (try? rows?.scalar(Bool.self)) == true
    }

    private func applyPendingWhileLocked(on connection: PostgresConnection) async throws -> Applied {
        var result = Applied()
        try await self.createBookkeeping(on: connection)
        let applied = Set(try await self.appliedVersions(on: connection))
        try await self.warnAboutEditedMigrations(on: connection)

        for migration in self.migrations where !applied.contains(migration.version) {
            self.logger.info(
                "applying migration",
                metadata: ["receipts.migration": "\(migration.version)_\(migration.name)"]
            )
            try await connection.withTransaction { connection in
                try await connection.execute(
                    "SELECT set_config(\(ReceiptsStore.allTenants.name), \(ReceiptsStore.allTenants.value), true)")
                try await connection.executeScript(migration.sql)
                try await connection.execute(
                    "INSERT INTO receipts.schema_migrations (version, name, checksum) VALUES (\(migration.version), \(migration.name), md5(\(migration.sql)))"
                )
            }
            result.migrations.append(migration)
        }
        result.scripts = try await self.applyChangedScripts(on: connection)
        return result
    }

    /// Applies the scripts whose text differs from what was last applied (or that never
    /// were), in their order, in one transaction: a script that fails leaves every one as it
    /// was.
    private func applyChangedScripts(on connection: PostgresConnection) async throws -> [RepeatableScript] {
        let rows = try await connection.query(
            """
            SELECT file.path
            FROM unnest(\(self.scripts.map(\.path))::text[], \(self.scripts.map(\.sql))::text[]) AS file (path, sql)
            LEFT JOIN receipts.schema_scripts AS applied USING (path)
            WHERE applied.checksum IS DISTINCT FROM md5(file.sql)
            """
        )
        let changedPaths = Set(try rows.map { try $0.decode(String.self, column: "path") })
        let changed = self.scripts.filter { changedPaths.contains($0.path) }
        guard !changed.isEmpty else { return [] }
        try await connection.withTransaction { connection in
            try await connection.execute(
                "SELECT set_config(\(ReceiptsStore.allTenants.name), \(ReceiptsStore.allTenants.value), true)")
            for script in changed {
                self.logger.info("applying script", metadata: ["receipts.script": "\(script.path)"])
                try await connection.executeScript(script.sql)
                try await connection.execute(
                    """
                    INSERT INTO receipts.schema_scripts (path, checksum) VALUES (\(script.path), md5(\(script.sql)))
                    ON CONFLICT (path) DO UPDATE SET checksum = excluded.checksum, applied_at = now()
                    """
                )
            }
        }
        return changed
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
            CREATE TABLE IF NOT EXISTS receipts.schema_scripts (
                path       text        PRIMARY KEY,
                checksum   text        NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            );
            COMMENT ON TABLE receipts.schema_scripts IS
                'Scripts of sql/functions, sql/views and sql/triggers as last applied to this database, with the MD5 of their SQL: a script whose file differs is applied again.';
            """
        )
    }

    private func warnAboutEditedMigrations(on connection: PostgresConnection) async throws {
        let rows = try await connection.query(
            """
            SELECT applied.version, applied.name
            FROM unnest(\(self.migrations.map(\.version))::int8[], \(self.migrations.map(\.sql))::text[]) AS file (version, sql)
            JOIN receipts.schema_migrations AS applied USING (version)
            WHERE applied.checksum <> md5(file.sql)
            """
        )
        for (version, name) in try rows.decode((Int, String).self) {
            self.logger.warning(
                "an applied migration was edited afterwards; its changes were not applied",
                metadata: ["receipts.migration": "\(version)_\(name)"]
            )
        }
    }
}
