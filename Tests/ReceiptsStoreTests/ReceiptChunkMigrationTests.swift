import Foundation
import Postgres
import ReceiptsCore
import ReceiptsStore
import TestSupport
import Testing

/// The folded chain's 0018 moved every message's receipt arrays into chunk rows
/// (`Tests/Fixtures/legacy-chain/0018_receipts_in_member_chunks.sql`): a database written in
/// the old layout keeps every reader, time and hidden read, in order, and goes on working,
/// also after today's runner takes it over (it records the baseline in place of the chain and
/// applies the functions and triggers of `sql/`).
@Suite("Receipts moved into chunks")
struct ReceiptChunkMigrationTests {
    /// One message's receipts as text (times as PostgreSQL prints them), in stored order.
    struct Receipts: Equatable {
        var delivered: [String]
        var read: [String]
        var hidden: [String]
    }

    @Test("a database with readers in the old layout migrates with every reader, time and hidden read kept")
    func oldLayoutMigrates() async throws {
        let all = try Migration.load(from: TestDatabase.packageRoot.appendingPathComponent("Tests/Fixtures/legacy-chain"))
        try await TestDatabase.withFreshDatabase { url in
            let configuration = PostgresConfiguration(connectionString: url)
            try await MigrationRunner(migrations: all.filter { $0.version <= 15 }, logger: TestDatabase.logger)
                .applyPending(to: configuration)
            let connection = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            do {
                try await Self.writeOldLayout(on: connection)
                let before = try await Self.oldReceipts(on: connection)
                let unreadBefore = try await Self.unreadCounts(on: connection)
                #expect(before.count == 9)
                #expect(before.values.map { $0.read.count }.reduce(0, +) > 100)

                try await MigrationRunner(migrations: all, logger: TestDatabase.logger).applyPending(to: configuration)
                let current = try MigrationRunner(directory: TestDatabase.packageRoot.appendingPathComponent("sql/migrations"), logger: TestDatabase.logger)
                let adopted = try await current.applyPending(to: configuration)
                #expect(adopted.adoptedLegacyChain)
                // The migrations after the baseline are applied as to any database.
                #expect(adopted.migrations.map(\.version) == current.migrations.map(\.version).filter { $0 > 1 })
                #expect(adopted.scripts.count == current.scripts.count)

                // Per message: the chunks hold exactly the old entries; each chunk keeps their order.
                let chunks = try await Self.chunkReceipts(on: connection)
                for (message, old) in before {
                    let rows = chunks[message] ?? []
                    #expect(rows.flatMap(\.delivered).sorted() == old.delivered.sorted(), "\(message)")
                    #expect(rows.flatMap(\.read).sorted() == old.read.sorted(), "\(message)")
                    #expect(rows.flatMap(\.hidden).sorted() == old.hidden.sorted(), "\(message)")
                    for row in rows {
                        #expect(row.delivered == old.delivered.filter(row.delivered.contains), "\(message)")
                        #expect(row.read == old.read.filter(row.read.contains), "\(message)")
                        #expect(row.hidden == old.hidden.filter(row.hidden.contains), "\(message)")
                    }
                }
                #expect(try await Self.unreadCounts(on: connection) == unreadBefore)

                // The service reads them chunk by chunk, each chunk in the order of reading (as
                // checked above).
                let pool = PostgresConnectionPool(configuration: ReceiptsStore.serviceSessions(of: configuration), logger: TestDatabase.logger)
                let store = ReceiptsStore(pool: pool, logger: TestDatabase.logger)
                let (message, _, _) = try #require(try await store.message(tenant: "t", chat: "big", id: "m1", viewer: "u0"))
                let stored = try #require(chunks["t/big/m1"]).flatMap(\.read)
                #expect(message.receipts.visibleReads.map(\.userId) == stored.map { String($0.split(separator: "@")[0]) })
                #expect(message.receipts.hiddenReaders == ["u7"])

                // And marking goes on: new readers once, repeats no-ops, one event each.
                let late = try await connection.query("SELECT marked::int8 FROM receipts.mark_read('t', 'big', 'u60', NULL, NULL)").scalar(Int.self)
                #expect(late == 6)
                let again = try await connection.query("SELECT marked::int8 FROM receipts.mark_read('t', 'big', 'u60', NULL, NULL)").scalar(Int.self)
                #expect(again == 0)
                let events = try await connection.query(
                    "SELECT count(*)::int8 FROM receipts.events WHERE tenant_id = 't' AND type = 'receipt.read' AND user_id = 'u60'").scalar(Int.self)
                #expect(events == 1)
                let sent = try await connection.query("SELECT outcome FROM receipts.send_message('t', 'big', 'm7', 'u0', 'x')").scalar(String.self)
                #expect(sent == "created")
                let chunksOfNew = try await connection.query(
                    "SELECT count(*)::int8 FROM receipts.receipt_chunks WHERE tenant_id = 't' AND chat_id = 'big' AND message_id = 'm7'").scalar(Int.self)
                #expect(chunksOfNew == 3)  // 71 members numbered: chunks 0, 1 and 2
                await pool.close()
                await connection.close()
            } catch {
                await connection.close()
                throw error
            }
        }
    }

    /// Two tenants: a group of 70 (three chunks) with deliveries, visible and hidden reads, a
    /// leave after reading, a late joiner, a batch of single reads; and a direct chat.
    static func writeOldLayout(on connection: PostgresConnection) async throws {
        // One statement per transaction, so that the reads have times of their own.
        let statements = [
            "SELECT receipts.create_tenant('t', 't', 'h1', 's')",
            "SELECT receipts.create_tenant('t2', 't2', 'h2', 's')",
            "SELECT receipts.put_chat('t', 'big', 'group', (SELECT array_agg('u' || i) FROM generate_series(0, 69) AS i))",
            "SELECT receipts.put_chat('t2', 'd', 'direct', ARRAY['a', 'b'])",
            "SELECT receipts.send_message('t', 'big', 'm' || i, 'u0', 'x') FROM generate_series(1, 5) AS i",
            "SELECT receipts.send_message('t2', 'd', 'm' || i, 'a', 'x') FROM generate_series(1, 3) AS i",
            "SELECT receipts.set_read_receipts('t', 'u7', false)",
            "SELECT receipts.mark_delivered('t', 'big', 'u' || i, NULL, NULL) FROM generate_series(40, 69) AS i",
        ] + (1...45).map { "SELECT receipts.mark_read('t', 'big', 'u\($0)', NULL, NULL)" } + [
            "SELECT receipts.mark_read_each('t', ARRAY['big', 'big', 'big'], ARRAY['u46', 'u47', 'u48'], ARRAY['m2', 'm2', 'm3'])",
            "SELECT receipts.leave_chat('t', 'big', 'u3')",
            "SELECT receipts.leave_chat('t', 'big', 'u50')",
            "SELECT receipts.join_chat('t', 'big', 'late')",
            "SELECT receipts.send_message('t', 'big', 'm6', 'u0', 'x')",
            "SELECT receipts.mark_read('t', 'big', 'late', NULL, NULL)",
            "SELECT receipts.mark_read('t2', 'd', 'b', ARRAY['m2'], NULL)",
        ]
        for statement in statements { try await connection.query(statement, []) }
    }

    static func oldReceipts(on connection: PostgresConnection) async throws -> [String: Receipts] {
        let rows = try await connection.query(
            """
            SELECT tenant_id || '/' || chat_id || '/' || message_id,
                   ARRAY(SELECT u || '@' || a FROM unnest(delivered_to, delivered_at) WITH ORDINALITY AS d(u, a, n) ORDER BY n),
                   ARRAY(SELECT u || '@' || a FROM unnest(read_by, read_at) WITH ORDINALITY AS r(u, a, n) ORDER BY n),
                   hidden_read_by::text[]
            FROM receipts.messages
            """)
        return Dictionary(uniqueKeysWithValues: try rows.map {
            (try $0.decode(String.self, column: 0),
             Receipts(delivered: try $0.decode(column: 1), read: try $0.decode(column: 2), hidden: try $0.decode(column: 3)))
        })
    }

    static func chunkReceipts(on connection: PostgresConnection) async throws -> [String: [Receipts]] {
        let rows = try await connection.query(
            """
            SELECT tenant_id || '/' || chat_id || '/' || message_id,
                   ARRAY(SELECT u || '@' || a FROM unnest(delivered_to, delivered_at) WITH ORDINALITY AS d(u, a, n) ORDER BY n),
                   ARRAY(SELECT u || '@' || a FROM unnest(read_by, read_at) WITH ORDINALITY AS r(u, a, n) ORDER BY n),
                   hidden_read_by::text[]
            FROM receipts.receipt_chunks ORDER BY tenant_id, chat_id, seq, chunk
            """)
        var chunks: [String: [Receipts]] = [:]
        for row in rows {
            chunks[try row.decode(String.self, column: 0), default: []].append(
                Receipts(delivered: try row.decode(column: 1), read: try row.decode(column: 2), hidden: try row.decode(column: 3)))
        }
        return chunks
    }

    static func unreadCounts(on connection: PostgresConnection) async throws -> [String] {
        try await connection.query(
            """
            SELECT tenant_id || '/' || chat_id || '/' || user_id || '=' || receipts.unread_count(tenant_id, chat_id, user_id)
            FROM receipts.chat_members ORDER BY 1
            """
        ).map { try $0.decode(String.self, column: 0) }
    }
}
