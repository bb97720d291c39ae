import Logging
import Postgres
import TestSupport
import Testing

/// A session keeps the plans of its functions' statements. A plan that fits the first
/// call must not ruin a later, larger one (see `sql/migrations/0013_plans_that_fit_every_call.sql`).
@Suite("Plans kept across calls")
struct PlanReuseTests {
    @Test("a read-all of 10,000 after a one-message read in the same session stays linear: under 3 s, not 11")
    func readAllAfterSmallRead() async throws {
        try await TestDatabase.ensureMigrated()
        let tenant = TestDatabase.uniqueName("plans")
        let pool = TestDatabase.pool
        try await pool.query("SELECT receipts.create_tenant($1, 'plans', $2, $3)", [tenant, PostgresBytes(Array(tenant.utf8)), PostgresBytes([1])])
        for chat in ["small", "big"] {
            try await pool.query("SELECT receipts.put_chat($1, $2, 'direct', $3)", [tenant, chat, ["alice", "bob"]])
        }
        try await pool.query("SELECT receipts.send_message($1, 'small', 'only', 'alice', 'hi')", [tenant])
        // The 10,000 as rows, in one short transaction: 10,000 send_message calls in one
        // statement run for half a minute on a database no ANALYZE has seen yet, and so long
        // a transaction keeps the service processes other tests start from becoming ready.
        try await pool.withTransaction { connection in
            try await connection.query("SELECT receipts.enter_tenant($1)", [tenant])
            try await connection.query(
                """
                INSERT INTO receipts.messages (tenant_id, chat_id, message_id, seq, sender_id, body)
                SELECT $1, 'big', 'm' || g, g, 'alice', 'hi' FROM generate_series(1, 10000) AS g
                """, [tenant])
            try await connection.query("UPDATE receipts.chats SET last_seq = 10000 WHERE tenant_id = $1 AND chat_id = 'big'", [tenant])
        }

        // A new session, so that its first run of the receipt triggers is the small one.
        let session = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
        let small = try await session.query("SELECT marked::int8 FROM receipts.mark_read($1, 'small', 'bob', ARRAY['only'], NULL)", [tenant])
        #expect(try small[0].decode(Int.self, column: 0) == 1)
        let start = ContinuousClock.now
        let all = try await session.query("SELECT marked::int8 FROM receipts.mark_read($1, 'big', 'bob', NULL, NULL)", [tenant])
        let took = ContinuousClock.now - start
        await session.close()

        #expect(try all[0].decode(Int.self, column: 0) == 10_000)
        // Linear, it takes about 0.1 s here; with a plan sized for one row, 11 s (quadratic).
        #expect(took < .seconds(3), "the read-all took \(took)")
        let events = try await pool.query(
            "SELECT cardinality(message_ids)::int8 FROM receipts.events WHERE tenant_id = $1 AND type = 'receipt.read' AND chat_id = 'big'",
            [tenant])
        #expect(try events.map { try $0.decode(Int.self, column: 0) } == [10_000])
    }

    /// `CREATE OR REPLACE FUNCTION` drops settings given by `ALTER FUNCTION`: a migration that
    /// restates one of these functions must repeat them.
    @Test("the keyed functions keep their generic plans, and the receipt triggers their hash joins")
    func settingsSurvive() async throws {
        try await TestDatabase.ensureMigrated()
        let rows = try await TestDatabase.pool.query(
            "SELECT proname, proconfig FROM pg_proc WHERE pronamespace = 'receipts'::regnamespace AND proname = ANY ($1)",
            [["mark_read", "mark_delivered", "unread_of", "events_since", "record_receipts", "record_unread_changes"]])
        var settings: [String: Set<String>] = [:]
        for row in rows { settings[try row.decode(column: 0)] = Set(try row.decode([String]?.self, column: 1) ?? []) }
        for function in ["mark_read", "mark_delivered", "unread_of", "events_since"] {
            #expect(settings[function]?.contains("plan_cache_mode=force_generic_plan") == true, "\(function): \(settings[function] ?? [])")
        }
        for trigger in ["record_receipts", "record_unread_changes"] {
            #expect(settings[trigger]?.isSuperset(of: ["enable_nestloop=off", "enable_hashjoin=on"]) == true, "\(trigger): \(settings[trigger] ?? [])")
        }
    }
}
