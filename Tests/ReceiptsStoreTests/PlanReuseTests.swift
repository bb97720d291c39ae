import Foundation
import Logging
import Postgres
import ReceiptsStore
import TestSupport
import Testing

/// A session keeps the plans of its functions' statements. A plan that fits the first
/// call must not ruin a later, larger one (see the comments on receipts.mark_read_each in
/// `sql/functions/marking.sql` and on the triggers in `sql/triggers/events.sql`). The work a
/// call does is checked here; how long it takes is the benchmark's to measure.
@Suite("Plans kept across calls")
struct PlanReuseTests {
    /// Rows a statement of the transaction read from a table, by sequential scans and by
    /// index scans (`pg_stat_xact_user_tables`: this transaction's counts, not yet reported).
    /// The work of `after` less that of `before`, table by table.
    static func work(_ after: [String: TableWork], since before: [String: TableWork]) -> [String: TableWork] {
        Dictionary(uniqueKeysWithValues: after.map { table, work in (table, work.less(before[table])) })
    }

    struct TableWork: Equatable, CustomStringConvertible {
        var sequentialScans: Int
        var rowsScanned: Int
        var rowsFetchedByIndex: Int
        var description: String { "\(self.sequentialScans) sequential scans, \(self.rowsScanned) rows scanned, \(self.rowsFetchedByIndex) fetched by index" }

        /// This work less `earlier` (none: all of it).
        func less(_ earlier: TableWork?) -> TableWork {
            guard let earlier else { return self }
            return TableWork(
                sequentialScans: self.sequentialScans - earlier.sequentialScans, rowsScanned: self.rowsScanned - earlier.rowsScanned,
                rowsFetchedByIndex: self.rowsFetchedByIndex - earlier.rowsFetchedByIndex)
        }
    }

    @Test("in a database no ANALYZE has seen, a read and a delivery of one message of 10,000 and a send fetch a few rows, and a delivery and a read of all of them a few a message: no table scanned")
    func readAllAfterSmallRead() async throws {
        // A fresh database, never analyzed: the planner knows only the tables' sizes, takes a
        // chat for about a row, and any join order looks as cheap as another. So a plan must
        // stay linear by its shape, not by its estimates (in CI's shared database, autovacuum's
        // ANALYZE comes or not before this test: a read-all once fetched 100 million rows).
        try await TestDatabase.withFreshDatabase { url in
            let configuration = PostgresConfiguration(connectionString: url)
            try await MigrationRunner(directory: TestDatabase.packageRoot.appendingPathComponent("sql/migrations"), logger: TestDatabase.logger)
                .applyPending(to: configuration)
            let setup = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            _ = try await setup.query("SELECT receipts.create_tenant('plans', 'plans', '\\x01'::bytea, '\\x01'::bytea)")
            _ = try await setup.query("SELECT receipts.put_chat('plans', chat, 'direct', ARRAY['alice', 'bob']) FROM unnest(ARRAY['small', 'big']) AS chat")
            _ = try await setup.query("SELECT receipts.send_message('plans', 'small', 'only', 'alice', 'hi')")
            // The 10,000 as rows, in one transaction (10,000 send_message calls would take
            // half a minute on a database no ANALYZE has seen yet).
            try await setup.withTransaction { connection in
                try await connection.query("SELECT receipts.enter_tenant('plans')")
                try await connection.query(
                    """
                    INSERT INTO receipts.messages (tenant_id, chat_id, message_id, seq, sender_id, body)
                    SELECT 'plans', 'big', 'm' || g, g, 'alice', 'hi' FROM generate_series(1, 10000) AS g
                    """)
                try await connection.query("UPDATE receipts.chats SET last_seq = 10000 WHERE tenant_id = 'plans' AND chat_id = 'big'")
            }
            await setup.close()

            // A new session, so that its first run of the marking function and the receipt
            // triggers is the small one.
            let session = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            let small = try await session.query("SELECT marked::int8 FROM receipts.mark_read('plans', 'small', 'bob', ARRAY['only'], NULL)")
            #expect(try small[0].decode(Int.self, column: 0) == 1)
            let calls: [(String, PostgresQuery, marks: Int, bound: Int)] = [
                // One message: a few lookups by key, whatever the chat's size.
                ("a read of one of 10,000 by id", "SELECT marked::int8 FROM receipts.mark_read('plans', 'big', 'bob', ARRAY['m5000'], NULL)", 1, 20),
                ("a delivery of one by id", "SELECT marked::int8 FROM receipts.mark_delivered('plans', 'big', 'bob', ARRAY['m7000'], NULL)", 1, 20),
                // The rest: a few fetches a message.
                ("a delivery of all", "SELECT marked::int8 FROM receipts.mark_delivered('plans', 'big', 'bob', NULL, NULL)", 9_998, 4 * 10_000),
                ("a read of all", "SELECT marked::int8 FROM receipts.mark_read('plans', 'big', 'bob', NULL, NULL)", 9_999, 4 * 10_000),
                // A send: its id checked by key, its chunk row's foreign key by (chat, seq).
                ("a send", "SELECT seq FROM receipts.send_message('plans', 'big', 'new', 'alice', 'hi')", 10_001, 20),
            ]
            for (call, query, marks, bound) in calls {
                let (marked, work) = try await session.withTransaction { connection in
                    // Counted from before the call (earlier transactions' counts stay in the view
                    // until the session reports them).
                    let before = try await Self.work(in: connection)
                    let marked = try await connection.query(query)
                    return (marked, Self.work(try await Self.work(in: connection), since: before))
                }
                #expect(try marked[0].decode(Int.self, column: 0) == marks, "\(call)")
                // Each message's row and its chunk row are fetched a few times (to find them,
                // to check and update the chunk, to move the watermark). Plans that took the chat
                // for a row walked it once per message (100 million rows for the read of all),
                // or, for one message, walked it whole (10,000 to 50 million).
                for table in ["messages", "receipt_chunks"] {
                    let tableWork = try #require(work[table], "\(call), \(table): \(work)")
                    #expect(tableWork.rowsScanned == 0, "\(call), \(table): \(tableWork)")
                    #expect(tableWork.rowsFetchedByIndex <= bound, "\(call), \(table): \(tableWork)")
                }
            }
            await session.close()

            let check = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            let events = try await check.query(
                "SELECT cardinality(message_ids)::int8 FROM receipts.events WHERE tenant_id = 'plans' AND type = 'receipt.read' AND chat_id = 'big' ORDER BY event_id")
            #expect(try events.map { try $0.decode(Int.self, column: 0) } == [1, 9_999])
            await check.close()
        }
    }

    @Test("a read, a delivery and a send of one message in a chat of 2,000 unread, in a database of many small chats, fetch a few rows: the walk from the watermark stops at the first message still to mark")
    func oneMessageBesideABacklog() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let configuration = PostgresConfiguration(connectionString: url)
            try await MigrationRunner(directory: TestDatabase.packageRoot.appendingPathComponent("sql/migrations"), logger: TestDatabase.logger)
                .applyPending(to: configuration)
            let setup = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            // What the planner sees in a chat service's database: many tenants, chats of ids
            // of their own, a few messages each. Taking tenant and chat as independent, a
            // generic plan expects a row or less of a chat, and a plan that reads all of a
            // chat's messages or chunk rows looks as cheap as one that reads what it needs.
            for statement: PostgresQuery in [
                "SELECT receipts.create_tenant('t' || g, 'small', convert_to('t' || g, 'UTF8'), '\\x01'::bytea) FROM generate_series(1, 300) AS g",
                "SELECT receipts.put_chat('t' || g, 'c' || g, 'direct', ARRAY['a', 'b']) FROM generate_series(1, 300) AS g",
                "SELECT receipts.send_message('t' || g, 'c' || g, 'm' || s, CASE s WHEN 1 THEN 'a' ELSE 'b' END, 'hi') FROM generate_series(1, 300) AS g, generate_series(1, 2) AS s",
            ] {
                _ = try await setup.query(statement)
            }
            _ = try await setup.query("SELECT receipts.put_chat('t1', 'big', 'direct', ARRAY['a', 'b'])")
            _ = try await setup.query("SELECT receipts.send_message('t1', 'big', 'b' || g, 'a', 'hi') FROM generate_series(1, 2000) AS g")
            _ = try await setup.executeScript("ANALYZE")
            await setup.close()

            // A new session: its plans are made now, with these statistics.
            let session = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            _ = try await session.query("SELECT receipts.mark_read('t2', 'c2', 'b', ARRAY['m1'], NULL)")
            _ = try await session.query("SELECT receipts.mark_delivered('t2', 'c2', 'b', ARRAY['m1'], NULL)")
            let calls: [(String, PostgresQuery, marks: Int)] = [
                ("read", "SELECT marked::int8 FROM receipts.mark_read('t1', 'big', 'b', ARRAY['b1'], NULL)", 1),
                ("delivery", "SELECT marked::int8 FROM receipts.mark_delivered('t1', 'big', 'b', ARRAY['b2'], NULL)", 1),
                // A read up to a message: the range above the watermark (b2 to b10), walked by seq.
                ("read up to", "SELECT marked::int8 FROM receipts.mark_read('t1', 'big', 'b', NULL, 'b10')", 9),
                // A send: PostgreSQL's foreign-key check of its chunk row looks the message up by
                // (tenant, chat, seq); with the statistics of `receipts-bench --only tenants`
                // (1,000 tenants, a chat of 10,000), an index of (tenant, chat, sender, seq)
                // served it by walking the chat (sql/migrations/0024_sender_index.sql; these
                // statistics did not show it).
                ("send", "SELECT seq FROM receipts.send_message('t1', 'big', 'new', 'a', 'hi')", 2_001),
            ]
            for (call, query, marks) in calls {
                let (marked, work) = try await session.withTransaction { connection in
                    // What the session counted before (the counts of earlier transactions stay
                    // in these views until the session reports them, at most once a second).
                    let before = try await Self.work(in: connection)
                    let marked = try await connection.query(query)
                    return (marked, Self.work(try await Self.work(in: connection), since: before))
                }
                #expect(try marked[0].decode(Int.self, column: 0) == marks, "\(call)")
                // The walk from the watermark to the first message still to mark stops there:
                // before, a plan sorted every message above the watermark first and looked up
                // each one's chunk row (in a database whose statistics made it check each
                // against every chunk row of the chat, a read took 20 s in a chat of 10,000).
                // A few rows a call, whatever the backlog: the counts of the reader's own
                // messages above the watermark by the sender's index, a delivery by id by keys
                // (both walked the chat's 2,000 before sql/migrations/0023 and 0024).
                let bounds = ["messages": 50, "receipt_chunks": 50]
                for (table, bound) in bounds {
                    let tableWork = try #require(work[table], "\(table): \(work)")
                    #expect(tableWork.rowsScanned == 0, "\(call), \(table): \(tableWork)")
                    #expect(tableWork.rowsFetchedByIndex <= bound, "\(call), \(table): \(tableWork)")
                }
            }
            await session.close()
        }
    }

    /// What the session's statements read from messages and receipt_chunks, as far as it has
    /// not reported it yet: this transaction's, and those of its transactions of the last
    /// second or so (PostgreSQL reports a session's counts when it goes idle, at most once a
    /// second).
    static func work(in connection: PostgresConnection) async throws -> [String: TableWork] {
        let rows = try await connection.query(
            """
            SELECT relname, seq_scan, seq_tup_read, coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables
            WHERE schemaname = 'receipts' AND relname IN ('messages', 'receipt_chunks')
            """)
        var work: [String: TableWork] = [:]
        for row in rows {
            work[try row.decode(String.self, column: 0)] = TableWork(
                sequentialScans: try row.decode(Int.self, column: 1), rowsScanned: try row.decode(Int.self, column: 2),
                rowsFetchedByIndex: try row.decode(Int.self, column: 3))
        }
        return work
    }

    /// The settings the plans above depend on, in each function's SET clause.
    @Test("the keyed functions keep their generic plans, marking its index lookups, and the receipt triggers their hash joins")
    func settingsSurvive() async throws {
        try await TestDatabase.ensureMigrated()
        let rows = try await TestDatabase.pool.query(
            "SELECT proname, proconfig FROM pg_proc WHERE pronamespace = 'receipts'::regnamespace AND proname = ANY ($1)",
            [["mark_read_each", "mark_delivered", "events_since", "record_receipts", "record_unread_changes"]])
        var settings: [String: Set<String>] = [:]
        for row in rows { settings[try row.decode(column: 0)] = Set(try row.decode([String]?.self, column: 1) ?? []) }
        #expect(
            settings["mark_read_each"]?.isSuperset(of: ["enable_hashjoin=off", "enable_mergejoin=off", "enable_seqscan=off", "enable_sort=off"]) == true)
        #expect(settings["mark_delivered"]?.contains("enable_sort=off") == true)
        for function in ["mark_read_each", "mark_delivered", "events_since"] {
            #expect(settings[function]?.contains("plan_cache_mode=force_generic_plan") == true, "\(function): \(settings[function] ?? [])")
        }
        for trigger in ["record_receipts", "record_unread_changes"] {
            #expect(settings[trigger]?.isSuperset(of: ["enable_nestloop=off", "enable_hashjoin=on"]) == true, "\(trigger): \(settings[trigger] ?? [])")
        }
    }
}
