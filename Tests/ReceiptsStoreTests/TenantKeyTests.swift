import Postgres
import ReceiptsStore
import TestSupport
import Testing

/// The schema stays ready to be distributed by tenant (docs/scaling.md): every table that
/// holds a tenant's rows has `tenant_id`, and its primary key and every unique index lead
/// with it, so that each row, and each uniqueness it must keep, lives on one tenant's shard.
/// The few tables of the whole database are named here with the reason, so that a new
/// table is placed on purpose.
@Suite("Tenant keys lead every table's keys")
struct TenantKeyTests {
    /// Tables of the whole database, with no tenant's rows.
    static let globalTables: Set<String> = [
        "schema_migrations", "schema_scripts",  // the migration runner's records
        "background_leases",  // which instance runs each background worker
        "event_histories",  // the event log's histories, one per database lineage
    ]

    /// Unique indexes of tenant tables that may not lead with the tenant, and why.
    static let globalUniques: [String: String] = [
        // A request names no tenant beside its key: the key's hash finds its tenant, so the
        // hash is unique across tenants. Distributed, `api_keys` is a reference table (on
        // every node: small, written only when a key is made or revoked).
        "api_keys_key_hash_key": "an API key is found by its hash alone"
    ]

    @Test("every table has tenant_id or is one of the database's own, named")
    func tablesHaveTenants() async throws {
        try await TestDatabase.ensureMigrated()
        let rows = try await TestDatabase.pool.query(
            """
            SELECT table_class.relname,
                   EXISTS (SELECT FROM pg_attribute AS attribute
                           WHERE attribute.attrelid = table_class.oid AND attribute.attname = 'tenant_id'
                             AND NOT attribute.attisdropped)
            FROM pg_class AS table_class
            WHERE table_class.relnamespace = 'receipts'::regnamespace AND table_class.relkind IN ('r', 'p')
            """)
        var global: Set<String> = []
        for row in rows where try !row.decode(Bool.self, column: 1) {
            global.insert(try row.decode(String.self, column: 0))
        }
        #expect(global == Self.globalTables, "tables without tenant_id: \(global.sorted())")
    }

    @Test("every primary key and unique index of a tenant's table leads with tenant_id")
    func keysLeadWithTenant() async throws {
        try await TestDatabase.ensureMigrated()
        let rows = try await TestDatabase.pool.query(
            """
            SELECT table_class.relname, index_class.relname, first_column.attname
            FROM pg_index AS index
            JOIN pg_class AS index_class ON index_class.oid = index.indexrelid
            JOIN pg_class AS table_class ON table_class.oid = index.indrelid
            LEFT JOIN pg_attribute AS first_column
                ON first_column.attrelid = table_class.oid AND first_column.attnum = index.indkey[0]
            WHERE table_class.relnamespace = 'receipts'::regnamespace AND table_class.relkind IN ('r', 'p')
              AND index.indisunique
            """)
        var checked = 0
        var offending: [String] = []
        var allowedSeen: Set<String> = []
        for row in rows {
            let table = try row.decode(String.self, column: 0)
            let index = try row.decode(String.self, column: 1)
            guard !Self.globalTables.contains(table) else { continue }
            checked += 1
            let first = try row.decode(String?.self, column: 2)
            if first == "tenant_id" { continue }
            if Self.globalUniques[index] != nil {
                allowedSeen.insert(index)
            } else {
                offending.append("\(table).\(index) leads with \(first ?? "an expression")")
            }
        }
        #expect(offending.isEmpty, "unique keys not led by tenant_id: \(offending)")
        #expect(allowedSeen == Set(Self.globalUniques.keys), "an allowed exception is gone: drop it from globalUniques")
        #expect(checked >= 20, "only \(checked) unique indexes of tenant tables were found")
    }
}
