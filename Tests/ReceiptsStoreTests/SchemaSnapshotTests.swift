import Foundation
import Postgres
import ReceiptsStore
import TestSupport
import Testing

/// What the migrations and scripts of `sql/` make of an empty database, held to a committed
/// listing, `Tests/Fixtures/schema.txt` (`SchemaCatalogue`: tables, columns, constraints,
/// indexes, sequences, domains, policies, triggers, views, functions with their signatures,
/// results, settings and grants, and every comment; function bodies are their files' text
/// and left out). A change to the schema is a change of that file, seen in review beside the
/// SQL that made it; a database migrated at an earlier commit and then at this one must list
/// the same (how an upgrade is checked). With `RECEIPTS_REGENERATE_SCHEMA=1` the test writes
/// the file first: `RECEIPTS_REGENERATE_SCHEMA=1 swift test --filter SchemaSnapshotTests`.
/// And the layout's rule: each function, trigger and view defined in exactly one file.
@Suite("Schema snapshot")
struct SchemaSnapshotTests {
    static let root = TestDatabase.packageRoot
    static let migrations = root.appendingPathComponent("sql/migrations")
    static let snapshot = root.appendingPathComponent("Tests/Fixtures/schema.txt")

    @Test("a new database, migrated, has the committed schema")
    func newDatabaseHasTheCommittedSchema() async throws {
        let listing = try await TestDatabase.withFreshDatabase { url in
            let configuration = PostgresConfiguration(connectionString: url)
            try await MigrationRunner(directory: Self.migrations, logger: TestDatabase.logger).applyPending(to: configuration)
            let connection = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            do {
                let listing = try await SchemaCatalogue.read(on: connection).listing
                await connection.close()
                return listing
            } catch {
                await connection.close()
                throw error
            }
        }
        if ProcessInfo.processInfo.environment["RECEIPTS_REGENERATE_SCHEMA"] == "1" {
            try FileManager.default.createDirectory(at: Self.snapshot.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(listing.utf8).write(to: Self.snapshot)
        }
        let committed = (try? String(contentsOf: Self.snapshot, encoding: .utf8)) ?? ""
        guard committed != listing else { return }
        let committedEntries = Set(SchemaCatalogue.entries(ofListing: committed))
        let newEntries = Set(SchemaCatalogue.entries(ofListing: listing))
        for entry in committedEntries.subtracting(newEntries).sorted() {
            Issue.record("committed, not made: \(entry)")
        }
        for entry in newEntries.subtracting(committedEntries).sorted() {
            Issue.record("made, not committed: \(entry)")
        }
        Issue.record("Tests/Fixtures/schema.txt is not what sql/ makes: regenerate it (see SchemaSnapshotTests) if the change is meant")
    }

    /// The copy of the policies that a later migration gets from `receipts.protect_tenant_table`
    /// is the one every tenant table has (here, `receipts.chats`, made by the baseline's loop).
    @Test("a tenant table that a migration protects has the policies and forced row-level security of every tenant table")
    func protectedTableIsLikeEveryTenantTable() async throws {
        try await TestDatabase.ensureMigrated()
        let connection = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
        do {
            try await connection.execute("BEGIN")
            try await connection.execute("CREATE TABLE receipts.protected_probe (tenant_id receipts.identifier NOT NULL)")
            try await connection.execute("CALL receipts.protect_tenant_table('receipts.protected_probe')")
            let rows = try await connection.query(
                """
                SELECT c.relname::text,
                       format('rls=%s/%s', c.relrowsecurity, c.relforcerowsecurity)
                       || coalesce((SELECT string_agg(format(' %s roles=%s using=%s check=%s comment=%s', p.polname, p.polroles::regrole[],
                                                             pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid),
                                                             obj_description(p.oid, 'pg_policy')), '' ORDER BY p.polname)
                                    FROM pg_policy AS p WHERE p.polrelid = c.oid), '')
                FROM pg_class AS c WHERE c.oid IN ('receipts.protected_probe'::regclass, 'receipts.chats'::regclass)
                """
            )
            try await connection.execute("ROLLBACK")
            await connection.close()
            var security: [String: String] = [:]
            for row in rows { security[try row.decode(String.self, column: 0)] = try row.decode(String.self, column: 1) }
            #expect(security["chats"]?.contains("all_tenants_maintenance") == true)
            #expect(security["protected_probe"] == security["chats"])
        } catch {
            await connection.close()
            throw error
        }
    }

    @Test("no function, trigger or view is defined in more than one file of sql/, and every one in the database has a file")
    func eachDefinedOnce() async throws {
        let sql = Self.root.appendingPathComponent("sql")
        let pattern = try Regex(#"(?i)\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?(FUNCTION|PROCEDURE|TRIGGER|VIEW)\s+([A-Za-z0-9_."]+)"#)
        var files: [String: Set<String>] = [:]
        for folder in ["migrations"] + RepeatableScript.folders {
            let directory = sql.appendingPathComponent(folder)
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { continue }
            for name in names where name.hasSuffix(".sql") {
                let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
                for match in text.matches(of: pattern) {
                    // A procedure is a function of pg_proc, as the database lists it.
                    let kind = String(match.output[1].substring ?? "").lowercased().replacingOccurrences(of: "procedure", with: "function")
                    let object = String(match.output[2].substring ?? "").lowercased()
                    files["\(kind) \(object)", default: []].insert("\(folder)/\(name)")
                }
            }
        }
        #expect(files.count > 40)
        for (object, where_) in files.sorted(by: { $0.key < $1.key }) where where_.count > 1 {
            Issue.record("\(object) is defined in \(where_.sorted().joined(separator: ", "))")
        }

        try await TestDatabase.ensureMigrated()
        let inDatabase = try await TestDatabase.pool.query(
            """
            SELECT 'function receipts.' || proname FROM pg_proc WHERE pronamespace = 'receipts'::regnamespace
            UNION SELECT 'trigger ' || tgname FROM pg_trigger
            WHERE tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'receipts'::regnamespace) AND NOT tgisinternal
            UNION SELECT 'view receipts.' || relname FROM pg_class WHERE relnamespace = 'receipts'::regnamespace AND relkind = 'v'
            """
        ).map { try $0.decode(String.self, column: 0) }
        for object in inDatabase where files[object] == nil {
            Issue.record("\(object) is in the database but defined in no file of sql/")
        }
    }
}
