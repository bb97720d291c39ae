import Foundation
import Postgres
import ReceiptsCore
import ReceiptsStore
import TestSupport
import Testing

@Suite("Forced row-level security")
struct ForcedRowSecurityTests {
    /// (The runner's bookkeeping and the database's event histories hold no tenant's data.)
    @Test("every tenant table forces row-level security, with the maintenance policy; the service is no maintainer")
    func catalog() async throws {
        try await TestDatabase.ensureMigrated()
        let unforced = try await TestDatabase.pool.query(
            """
            SELECT coalesce(array_agg(class.relname::text ORDER BY class.relname), '{}')
            FROM pg_class AS class
            WHERE class.relnamespace = 'receipts'::regnamespace AND class.relkind IN ('r', 'p')
              AND class.relname NOT IN ('schema_migrations', 'schema_scripts', 'event_histories')
              AND NOT (class.relrowsecurity AND class.relforcerowsecurity
                       AND EXISTS (SELECT FROM pg_policy AS policy
                                   WHERE policy.polrelid = class.oid AND policy.polname = 'all_tenants_maintenance'))
            """
        ).scalar([String].self)
        #expect(unforced == [])
        let serviceMayMaintain = try await TestDatabase.pool.query(
            "SELECT pg_has_role('receipts_service', 'receipts_maintenance', 'MEMBER')"
        ).scalar(Bool.self)
        #expect(!serviceMayMaintain)
    }

    /// A database owned by a login role that is not a superuser (superusers are beyond
    /// row-level security, forced or not), its URL, and the cleanup.
    func withOwnedDatabase(_ body: (_ ownerURL: String) async throws -> Void) async throws {
        try await TestDatabase.ensureMigrated()  // creates the cluster's roles first
        let owner = TestDatabase.uniqueName("owner")
        let password = TestDatabase.uniqueName("pw")
        let database = TestDatabase.uniqueName("owned")
        // Identifiers and the password come from uniqueName ([a-z0-9_]); DDL takes no parameters.
        try await TestDatabase.pool.withConnection { connection in
            try await connection.executeScript("CREATE ROLE \(owner) LOGIN CREATEROLE PASSWORD '\(password)'")
            try await connection.executeScript("CREATE DATABASE \(database) OWNER \(owner)")
        }
        var components = try #require(URLComponents(string: TestDatabase.url))
        components.user = owner
        components.password = password
        components.path = "/" + database
        do {
            try await body(try #require(components.string))
        } catch {
            try? await self.drop(database: database, owner: owner)
            throw error
        }
        try await self.drop(database: database, owner: owner)
    }

    private func drop(database: String, owner: String) async throws {
        try await TestDatabase.pool.withConnection { connection in
            try await connection.executeScript("DROP DATABASE IF EXISTS \(database) WITH (FORCE)")
            try await connection.executeScript("DROP ROLE IF EXISTS \(owner)")
        }
    }

    @Test("the owner sees no tenant without the maintenance setting; migrations, lookups, the log and retention still work")
    func ownerIsBound() async throws {
        try await withOwnedDatabase { url in
            let owner = PostgresConfiguration(connectionString: url, applicationName: "receipts-tests")
            let current = try MigrationRunner(directory: TestDatabase.packageRoot.appendingPathComponent("sql/migrations"), logger: TestDatabase.logger)
            try await current.applyPending(to: owner)

            // The service's work, as the service does it.
            let pool = PostgresConnectionPool(configuration: ReceiptsStore.serviceSessions(of: owner), logger: TestDatabase.logger)
            let store = ReceiptsStore(pool: pool, logger: TestDatabase.logger)
            for tenant in ["t1", "t2"] {
                #expect(try await store.createTenant(id: tenant, name: tenant, apiKeyHash: Array("key-\(tenant)".utf8), tokenSecret: [1]))
                #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: ["a", "b"]) == .created)
                _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m1", sender: "a", text: "hi")
            }
            // The SECURITY DEFINER functions, run as the owner, see every tenant.
            #expect(try await store.tenant(apiKeyHash: Array("key-t2".utf8)) == "t2")
            #expect(try await store.tokenSecrets(tenant: "t1")?.current == [1])
            #expect(try await store.credentials.hasTenant("t2"))
            let page = try await store.eventLog(after: 0, limit: 100)
            #expect(Set(page.events.map(\.tenantId)) == ["t1", "t2"])

            // The owner itself, in psql, sees nothing until it says which tenant or all.
            let connection = try await PostgresConnection.connect(to: owner, logger: TestDatabase.logger)
            #expect(try await connection.query("SELECT count(*) FROM receipts.messages").scalar(Int.self) == 0)
            #expect(try await connection.execute("UPDATE receipts.tenants SET name = 'x'") == 0)
            let oneTenant = try await connection.withTransaction { connection in
                try await connection.execute("SELECT receipts.enter_tenant($1)", ["t1"])
                return try await connection.query("SELECT count(*) FROM receipts.messages").scalar(Int.self)
            }
            #expect(oneTenant == 1)
            let allTenants = try await connection.withTransaction { connection in
                try await connection.execute("SELECT set_config('receipts.all_tenants', 'on', true)")
                return try await connection.query("SELECT count(*) FROM receipts.messages").scalar(Int.self)
            }
            #expect(allTenants == 2)

            // A later migration that moves every tenant's rows as the owner.
            let moving = Migration(version: 99_999, name: "moves_rows", sql: "UPDATE receipts.tenants SET name = name || ' (moved)';")
            try await MigrationRunner(migrations: current.migrations + [moving], scripts: current.scripts, logger: TestDatabase.logger)
                .applyPending(to: owner)
            let names = try await connection.withTransaction { connection in
                try await connection.execute("SELECT set_config('receipts.all_tenants', 'on', true)")
                return try await connection.query("SELECT array_agg(name ORDER BY name) FROM receipts.tenants").scalar([String].self)
            }
            #expect(names == ["t1 (moved)", "t2 (moved)"])
            await connection.close()

            // Retention deletes every tenant's old events.
            #expect(try await store.pruneEvents(olderThanSeconds: 0) == page.events.count)
            await pool.close()
        }
    }
}
