import Postgres
import ReceiptsStore
import TestSupport
import Testing

/// `receipts.mark_read_each` is made of steps, each a function of its own
/// (`sql/functions/marking.sql`). Their plans must be those the one function had: each
/// PL/pgSQL step keeps its settings (generic plans, nested loops only, no sorts, no JIT), and
/// `receipts.read_requests` stays inlinable into the statement that reads it (SQL, not
/// volatile, not strict, no SET clause), so it is planned with that statement's settings and
/// never on its own at each call.
@Suite("Read steps keep the batch's plans")
struct ReadStepSettingsTests {
    @Test("each PL/pgSQL step of mark_read_each has its settings, and read_requests stays inlinable")
    func stepSettings() async throws {
        try await TestDatabase.ensureMigrated()
        let steps = ["mark_read_each", "append_reads", "settle_reads", "read_answers", "read_requests"]
        let rows = try await TestDatabase.pool.query(
            """
            SELECT proname, language.lanname, provolatile::text, proisstrict, proconfig
            FROM pg_proc JOIN pg_language AS language ON language.oid = prolang
            WHERE pronamespace = 'receipts'::regnamespace AND proname = ANY ($1)
            """, [steps])
        var settings: [String: Set<String>] = [:]
        for row in rows {
            let name = try row.decode(String.self, column: 0)
            let config = Set(try row.decode([String]?.self, column: 4) ?? [])
            settings[name] = config
            if name == "read_requests" {
                #expect(try row.decode(String.self, column: 1) == "sql")
                #expect(try row.decode(String.self, column: 2) != "v", "read_requests must not be volatile (it would not be inlined)")
                #expect(try row.decode(Bool.self, column: 3) == false, "read_requests must not be strict (it would not be inlined)")
                #expect(config.isEmpty, "read_requests must have no SET clause (it would not be inlined): \(config)")
            }
        }
        #expect(Set(settings.keys) == Set(steps))
        let batch = settings["mark_read_each"] ?? []
        #expect(batch.isSuperset(of: ["enable_hashjoin=off", "enable_mergejoin=off", "enable_seqscan=off", "enable_sort=off", "jit=off",
                                      "plan_cache_mode=force_generic_plan"]))
        for step in ["append_reads", "settle_reads", "read_answers"] {
            #expect(settings[step] == batch, "\(step): \(settings[step] ?? []) against mark_read_each's \(batch)")
        }
    }
}
