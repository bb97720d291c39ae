import Postgres
@testable import ReceiptsStore
import TestSupport
import Testing

/// A SQL function's outcome that Swift does not know is a bug, never a guess: the request
/// fails (the service answers 500 and logs it) instead of, say, a silent 404.
@Suite("Outcomes from SQL")
struct UnexpectedOutcomeTests {
    func row(_ sql: String) async throws -> PostgresRow {
        try await TestDatabase.pool.query(sql, [])[0]
    }

    @Test("known outcomes decode; an unknown one throws UnexpectedOutcome, for reads, marks and sends")
    func unknownOutcomesThrow() async throws {
        let marked = try MarkReadOutcome(row: try await row("SELECT 'marked'::text AS outcome, 2 AS marked, 5 AS unread_count"))
        #expect(try marked.get() == (2, 5))
        let notMember = try MarkReadOutcome(row: try await row("SELECT 'not_member'::text AS outcome, 0 AS marked, 0 AS unread_count"))
        #expect(throws: MarkFailure.notMember) { try notMember.get() }

        let typo = try await row("SELECT 'chat_not_fund'::text AS outcome, 0 AS marked, 0 AS unread_count")
        let error = #expect(throws: UnexpectedOutcome.self) { try MarkReadOutcome(row: typo) }
        #expect(error?.outcome == "chat_not_fund")
        #expect(throws: UnexpectedOutcome.self) { try MarkFailure.outcome(of: typo, from: "receipts.mark_delivered") }
        let sent = try await row("SELECT 'creatd'::text, 1::int8, now(), NULL::text[]")
        #expect(throws: UnexpectedOutcome.self) { try SendResult(row: sent) }
        let missing = try await row("SELECT 'chat_not_found'::text, NULL::int8, NULL::timestamptz, NULL::text[]")
        if case .chatNotFound = try SendResult(row: missing) {} else {
            Issue.record("chat_not_found did not decode")
        }
    }
}
