import Foundation
import Postgres
import ReceiptsStore
import TestSupport
import Testing

/// `sql/migrations/0001_baseline.sql` folded an unreleased chain of 19 migrations (kept in
/// `Tests/Fixtures/legacy-chain`, which the runner never reads), and the functions and
/// triggers moved to `sql/functions` and `sql/triggers`. These tests hold the new layout to
/// what the chain built, and the layout to its rule: each function, trigger and view defined
/// in exactly one file.
@Suite("Schema layout")
struct MigrationCatalogueTests {
    static let root = TestDatabase.packageRoot
    static let legacyChain = root.appendingPathComponent("Tests/Fixtures/legacy-chain")
    static let migrations = root.appendingPathComponent("sql/migrations")

    /// Every way today's catalogue differs from the folded chain's, on purpose, with why.
    /// Anything else that differs fails the test.
    static let intendedDifferences: [String: String] = [
        // Comments that named a migration of the chain name the file that explains it now.
        "comment table column receipts.events.event_id": "points at sql/functions/events.sql",
        "comment sequence receipts.abandoned_event_ids": "points at sql/functions/events.sql",
        "comment function receipts.works_across_tenants()": "points at the baseline",
        "comment function receipts.renumber_abandoned_event(pg_catalog.text,bigint)": "points at sql/functions/events.sql",
        "comment function receipts.renumber_abandoned_events()": "points at sql/functions/events.sql",
        "comment function receipts.abandon_event_ids(bigint)": "points at sql/functions/events.sql",
        // Each rule once: one set-based marking function, of which a single read is a batch of
        // one; one unread formula, in a view.
        "function receipts.mark_read_each(text,text[],text[],text[])": "the batch of single reads, replaced",
        "body receipts.mark_read_each(text,text[],text[],text[])": "the batch of single reads, replaced",
        "comment function receipts.mark_read_each(pg_catalog.text,pg_catalog.text[],pg_catalog.text[],pg_catalog.text[])": "replaced",
        "function receipts.mark_read_each(text,text[],text[],text[],boolean[])": "the one implementation of reads",
        "body receipts.mark_read_each(text,text[],text[],text[],boolean[])": "the one implementation of reads",
        "comment function receipts.mark_read_each(pg_catalog.text,pg_catalog.text[],pg_catalog.text[],pg_catalog.text[],boolean[])": "new",
        "function receipts.mark_read(text,text,text,text[],text)": "one request of mark_read_each (SQL, no settings of its own)",
        "body receipts.mark_read(text,text,text,text[],text)": "one request of mark_read_each",
        "function receipts.unread_of(receipts.chat_members,bigint)": "the formula moved to the view member_unread",
        "body receipts.unread_of(receipts.chat_members,bigint)": "the formula moved to the view member_unread",
        "comment function receipts.unread_of(receipts.chat_members,bigint)": "removed",
        "function receipts.own_messages(text,text,text,bigint,bigint)": "unused: the view counts own messages",
        "body receipts.own_messages(text,text,text,bigint,bigint)": "unused",
        "comment function receipts.own_messages(pg_catalog.text,pg_catalog.text,pg_catalog.text,bigint,bigint)": "removed",
        "function receipts.receipt_chunks_of(text,text,bigint,bigint)": "a page reads receipt_chunks directly, unsorted",
        "body receipts.receipt_chunks_of(text,text,bigint,bigint)": "removed",
        "comment function receipts.receipt_chunks_of(pg_catalog.text,pg_catalog.text,bigint,bigint)": "removed",
        "body receipts.unread_count(text,text,text)": "reads the view",
        "body receipts.unread_counts(text,text)": "reads the view",
        "body receipts.record_unread_changes()": "reads the view",
        "relation member_unread": "the unread formula, once",
        "view member_unread": "the unread formula, once",
        "comment view receipts.member_unread": "new",
    ].merging(
        ["tenant_id", "chat_id", "user_id", "left_at", "marked_unread", "unread_count"].map { ("column member_unread.\($0)", "the view's columns") },
        uniquingKeysWith: { first, _ in first }
    ).merging(
        ["chat_members", "chats", "event_retention", "events", "membership_periods", "messages", "receipt_chunks", "tenants", "users"]
            .map { ("comment policy all_tenants_maintenance on receipts.\($0)", "points at the baseline") },
        uniquingKeysWith: { first, _ in first })

    /// What migrations after the baseline create or change on purpose, by name: a difference
    /// whose key names one of these is that migration's (`key.contains(name)`).
    static let laterMigrationChanges: [String: [String]] = [
        "0003_deleting_and_credentials": [
            // New tables, with their columns, keys, indexes and policies.
            "api_keys", "chat_purges", "deleted_messages", "token_revocations", "erasures", "erasure_chats", "tenant_erasures",
            "background_leases",
            // Changed: a tenant's keys moved to api_keys, its secret has generations; events
            // take the new types (chat_id, user_id may be null); messages outlive their chat
            // row until the purge.
            "tenants.", "receipts.tenants", "tenants_api_key_hash_key", "events.chat_id", "events.user_id",
            "events.events_type_check", "messages.messages_tenant_id_chat_id_fkey",
        ] + [
            "add_api_key", "create_tenant", "credential_directory", "credentials_changed", "current_token_revocations",
            "delete_chat", "delete_message", "delete_message_each", "new_key_id", "purge_chat_messages", "purge_deleted_chat_batch", "put_chat",
            "record_api_key_use", "remove_api_key", "replace_api_key", "revoke_user_tokens", "rotate_token_secret",
            "send_each", "send_message", "tenant_for_api_key", "tenant_token_secret", "tenant_token_secrets",
            "request_user_erasure", "user_erasure", "request_tenant_erasure", "erase_user_step", "erase_tenant_step", "erasure_step",
        ].map { "receipts.\($0)(" },
        // A tenant's allowed web origins (a column of tenants, covered above by "tenants.").
        "0004_allowed_origins": ["set_allowed_origins", "tenant_allowed_origins"].map { "receipts.\($0)(" },
        // Event histories (a table; webhooks' position_history is covered by "webhook"); the
        // log's readers say which history they read in, and the commit-time check begins one.
        "0005_event_histories": ["event_histories"] + [
            "wal_timeline", "current_event_history", "enter_event_history", "begin_history_locked", "begin_event_history", "event_history_lineage",
            "settle_event_history", "events_since", "newest_event", "stream_position", "retained_events_after",
            "renumber_abandoned_events",
        ].map { "receipts.\($0)(" },
    ]

    /// Whether a difference is one a migration after the baseline made.
    static func isLaterMigrationChange(_ key: String) -> Bool {
        Self.laterMigrationChanges.values.contains { names in names.contains { key.contains($0) } }
    }

    /// Objects that migrations after the fold add (with their scripts), by a word every key of
    /// theirs contains: they are new in today's catalogue only.
    static let addedAfterTheFold: [String: String] = [
        "webhook": "0002_webhooks and sql/functions/webhooks.sql (issue 18)",
    ]

    /// The differences that are comments of the baseline (a database that ran the chain keeps
    /// the chain's: the runner records the baseline, it does not run it).
    static var baselineComments: Set<String> {
        Set(intendedDifferences.filter { key, why in
            why.hasPrefix("points at") && (!key.hasPrefix("comment function") || key.contains("works_across_tenants"))
        }.keys)
    }

    static func catalogue(of url: String) async throws -> SchemaCatalogue {
        let connection = try await PostgresConnection.connect(to: PostgresConfiguration(connectionString: url), logger: TestDatabase.logger)
        do {
            let catalogue = try await SchemaCatalogue.read(on: connection)
            await connection.close()
            return catalogue
        } catch {
            await connection.close()
            throw error
        }
    }

    @Test("an empty database migrated today has the catalogue the folded chain built, but for the listed changes")
    func sameCatalogueAsTheChain() async throws {
        let legacy = try await TestDatabase.withFreshDatabase { url in
            try await MigrationRunner(migrations: try Migration.load(from: Self.legacyChain), logger: TestDatabase.logger)
                .applyPending(to: PostgresConfiguration(connectionString: url))
            return try await Self.catalogue(of: url)
        }
        let current = try await TestDatabase.withFreshDatabase { url in
            try await MigrationRunner(directory: Self.migrations, logger: TestDatabase.logger)
                .applyPending(to: PostgresConfiguration(connectionString: url))
            return try await Self.catalogue(of: url)
        }
        #expect(legacy.entries.count > 300)
        let differences = current.differences(from: legacy)
        let added = differences.filter { key in
            legacy.entries[key] == nil && Self.addedAfterTheFold.keys.contains { key.contains($0) }
        }
        for word in Self.addedAfterTheFold.keys {
            #expect(added.contains { $0.hasPrefix("relation \(word)") }, "\(word): nothing added")
        }
        for key in differences.subtracting(Self.intendedDifferences.keys).subtracting(added).sorted() where !Self.isLaterMigrationChange(key) {
            Issue.record("\(key): chain \(legacy.entries[key] ?? "(none)") | today \(current.entries[key] ?? "(none)")")
        }
        for key in Set(Self.intendedDifferences.keys).subtracting(differences).sorted() {
            Issue.record("\(key) was listed as changed on purpose, but is as the chain left it")
        }
    }

    @Test("a database migrated by the whole folded chain is taken over: the baseline recorded, the scripts applied")
    func chainTakenOver() async throws {
        let fresh = try await TestDatabase.withFreshDatabase { url in
            try await MigrationRunner(directory: Self.migrations, logger: TestDatabase.logger)
                .applyPending(to: PostgresConfiguration(connectionString: url))
            return try await Self.catalogue(of: url)
        }
        try await TestDatabase.withFreshDatabase { url in
            let configuration = PostgresConfiguration(connectionString: url)
            try await MigrationRunner(migrations: try Migration.load(from: Self.legacyChain), logger: TestDatabase.logger)
                .applyPending(to: configuration)
            let runner = try MigrationRunner(directory: Self.migrations, logger: TestDatabase.logger)
            let applied = try await runner.applyPending(to: configuration)
            #expect(applied.adoptedLegacyChain)
            #expect(applied.migrations.map(\.version) == runner.migrations.map(\.version).filter { $0 > 1 })
            #expect(applied.scripts.map(\.path) == runner.scripts.map(\.path))
            let connection = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            let recorded = try await runner.appliedVersions(on: connection)
            await connection.close()
            #expect(recorded == runner.migrations.map(\.version))

            let takenOver = try await Self.catalogue(of: url)
            #expect(takenOver.differences(from: fresh) == Self.baselineComments)
            #expect(try await runner.applyPending(to: configuration).isEmpty)
        }
    }

    @Test("a database that ran only a part of the folded chain is refused, untouched")
    func partOfTheChainRefused() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let configuration = PostgresConfiguration(connectionString: url)
            let part = try Migration.load(from: Self.legacyChain).filter { $0.version <= 17 }
            try await MigrationRunner(migrations: part, logger: TestDatabase.logger).applyPending(to: configuration)
            let runner = try MigrationRunner(directory: Self.migrations, logger: TestDatabase.logger)
            let error = await #expect(throws: LegacyChainError.self) { try await runner.applyPending(to: configuration) }
            #expect(error?.recordedVersions == Array(1...17))
            #expect(error?.description.contains("recreate the database") == true)
            let connection = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            #expect(try await runner.appliedVersions(on: connection) == Array(1...17))
            #expect(try await runner.appliedScripts(on: connection).isEmpty)
            await connection.close()
        }
    }

    @Test("the runner knows the folded chain's files as they landed")
    func legacyChecksums() async throws {
        let files = try Migration.load(from: Self.legacyChain)
        let connection = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
        let rows = try await connection.query(
            "SELECT version, name, md5(sql) FROM unnest($1::int8[], $2::text[], $3::text[]) AS file (version, name, sql) ORDER BY version",
            [files.map(\.version), files.map(\.name), files.map(\.sql)])
        await connection.close()
        let recorded = try rows.map { "\(try $0.decode(Int.self, column: 0)) \(try $0.decode(String.self, column: 1)) \(try $0.decode(String.self, column: 2))" }
        #expect(recorded == MigrationRunner.foldedChain.map { "\($0.version) \($0.name) \($0.checksum)" })
    }

    @Test("no function, trigger or view is defined in more than one file of sql/, and every one in the database has a file")
    func eachDefinedOnce() async throws {
        let sql = Self.root.appendingPathComponent("sql")
        let pattern = try Regex(#"(?i)\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?(FUNCTION|TRIGGER|VIEW)\s+([A-Za-z0-9_."]+)"#)
        var files: [String: Set<String>] = [:]
        for folder in ["migrations"] + RepeatableScript.folders {
            let directory = sql.appendingPathComponent(folder)
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { continue }
            for name in names where name.hasSuffix(".sql") {
                let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
                for match in text.matches(of: pattern) {
                    let kind = String(match.output[1].substring ?? "").lowercased()
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
