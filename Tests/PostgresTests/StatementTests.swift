import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Statements, errors and transactions")
struct StatementTests {
    let pool = TestDatabase.pool

    /// Creates a table only this test uses, and drops it afterwards.
    func withScratchTable(_ body: (String) async throws -> Void) async throws {
        // In `public`: the test role's search path starts with its own schema, `receipts`,
        // whose tables a catalogue test checks.
        let table = "public." + TestDatabase.uniqueName("scratch")
        // A table name is an identifier, not a value; uniqueName yields only [a-z0-9_].
        try await pool.withConnection { try await $0.executeScript("CREATE TABLE \(table) (id int PRIMARY KEY, note text)") }
        do {
            try await body(table)
        } catch {
            try? await pool.withConnection { _ = try await $0.executeScript("DROP TABLE \(table)") }
            throw error
        }
        try await pool.withConnection { _ = try await $0.executeScript("DROP TABLE \(table)") }
    }

    @Test("a duplicate key is SQLSTATE 23505 with its constraint")
    func duplicateKey() async throws {
        try await withScratchTable { table async throws in
            #expect(try await pool.execute("INSERT INTO \(table) (id, note) VALUES ($1, $2)", [1, "first"]) == 1)
            let error = await #expect(throws: PostgresError.self) {
                try await pool.execute("INSERT INTO \(table) (id, note) VALUES ($1, $2)", [1, "again"])
            }
            #expect(error?.code == .server)
            #expect(error?.sqlState == PostgresError.SQLState.uniqueViolation)
            #expect(error?.isUniqueViolation == true)
            #expect(error?.constraint == "\(table.dropFirst("public.".count))_pkey")
            #expect(error?.detail?.contains("(id)=(1)") == true)
        }
    }

    @Test("commands report the rows they changed")
    func affectedRows() async throws {
        try await withScratchTable { table async throws in
            #expect(try await pool.execute("INSERT INTO \(table) SELECT g, 'n' FROM generate_series(1, 5) g", []) == 5)
            #expect(try await pool.execute("UPDATE \(table) SET note = $1 WHERE id > $2", ["m", 2]) == 3)
            #expect(try await pool.execute("DELETE FROM \(table) WHERE id = $1", [99]) == 0)
        }
    }

    @Test("a transaction whose body throws leaves no rows")
    func rollback() async throws {
        struct Abort: Error {}
        try await withScratchTable { table async throws in
            await #expect(throws: Abort.self) {
                try await pool.withTransaction { connection in
                    try await connection.execute("INSERT INTO \(table) (id, note) VALUES ($1, $2)", [1, "gone"])
                    try await connection.execute("INSERT INTO \(table) (id, note) VALUES ($1, $2)", [2, "gone"])
                    throw Abort()
                }
            }
            #expect(try await pool.query("SELECT count(*) FROM \(table)", []).scalar(Int.self) == 0)
            try await pool.withTransaction { connection in
                try await connection.execute("INSERT INTO \(table) (id, note) VALUES ($1, $2)", [3, "kept"])
            }
            #expect(try await pool.query("SELECT count(*) FROM \(table)", []).scalar(Int.self) == 1)
        }
    }

    @Test("a commit after a swallowed error throws instead of silently rolling back")
    func commitOfFailedTransaction() async throws {
        try await withScratchTable { table async throws in
            let error = await #expect(throws: PostgresError.self) {
                try await pool.withTransaction { connection in
                    try await connection.execute("INSERT INTO \(table) (id, note) VALUES ($1, $2)", [1, "a"])
                    _ = try? await connection.execute("INSERT INTO \(table) (id, note) VALUES ($1, $2)", [1, "dup"])
                }
            }
            #expect(error?.sqlState == "25P02")
            #expect(try await pool.query("SELECT count(*) FROM \(table)", []).scalar(Int.self) == 0)
        }
    }

    @Test("statements are prepared once per connection and reused")
    func preparedStatementsAreReused() async throws {
        let connection = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
        let marker = TestDatabase.uniqueName("marker")
        for value in 1...3 {
            let rows = try await connection.query("SELECT $1::text || $2::text", [marker, String(value)])
            #expect(try rows.scalar(String.self) == marker + String(value))
        }
        let prepared = try await connection.query(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1",
            ["SELECT $1::text || $2::text"]
        )
        #expect(try prepared.scalar(Int.self) == 1)
        await connection.close()
    }

    @Test("a syntax error is a server error and the connection stays usable")
    func syntaxError() async throws {
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELEC 1") }
        #expect(error?.sqlState == "42601")
        #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
    }
}
