@testable import Postgres
import Testing

/// The names of a session's prepared statements, without a database.
@Suite("Prepared statements: names by SQL and parameter types")
struct PreparedStatementsTests {
    typealias Key = PreparedStatements.Key

    @Test("a statement not yet recorded has no name; once recorded, it is found by its SQL and types")
    func recordAndLookUp() {
        var statements = PreparedStatements()
        let key = Key(sql: "SELECT $1::text", types: [0])
        #expect(statements.name(for: key) == nil)
        let name = statements.reserveName()
        #expect(statements.name(for: key) == nil, "a reserved name is not yet a prepared statement")
        statements.record(name, for: key)
        #expect(statements.name(for: key) == "receipts_1")
    }

    @Test("the same SQL with other parameter types is another statement")
    func typesAreOfTheKey() {
        var statements = PreparedStatements()
        let untyped = Key(sql: "SELECT $1", types: [0])
        let typed = Key(sql: "SELECT $1", types: [PostgresDataType.int8.oid])
        let first = statements.reserveName()
        statements.record(first, for: untyped)
        #expect(statements.name(for: typed) == nil)
        let second = statements.reserveName()
        statements.record(second, for: typed)
        #expect(statements.name(for: untyped) == "receipts_1")
        #expect(statements.name(for: typed) == "receipts_2")
    }

    @Test("names are numbered in the order reserved, and a forgotten statement is prepared again under a new name")
    func namesNeverReused() {
        var statements = PreparedStatements()
        let key = Key(sql: "SELEC 1", types: [])
        let failed = statements.reserveName()
        statements.record(failed, for: key)
        statements.forget(key)
        #expect(statements.name(for: key) == nil)
        let again = statements.reserveName()
        #expect(failed == "receipts_1")
        #expect(again == "receipts_2")
        #expect(statements.reserved == 2)
    }

    @Test("a name reserved for a prepare that failed before it was recorded is not given out again")
    func failedBeforeRecording() {
        var statements = PreparedStatements()
        _ = statements.reserveName()
        let next = statements.reserveName()
        #expect(next == "receipts_2")
    }

    @Test("forgetting one statement leaves the others")
    func forgetOne() {
        var statements = PreparedStatements()
        let kept = Key(sql: "SELECT 1", types: [])
        let dropped = Key(sql: "SELECT 2", types: [])
        let keptName = statements.reserveName()
        statements.record(keptName, for: kept)
        let droppedName = statements.reserveName()
        statements.record(droppedName, for: dropped)
        statements.forget(dropped)
        #expect(statements.name(for: kept) == "receipts_1")
        #expect(statements.name(for: dropped) == nil)
    }
}
