import Foundation
import Postgres
import TestSupport
import Testing

/// `PostgresConnection.reduceRows`: a statement's rows handed over one by one as they arrive
/// (libpq's single-row mode).
@Suite("Rows one by one")
struct SingleRowTests {
    let pool = TestDatabase.pool

    struct Stop: Error {}

    @Test("every row comes, in the server's order, as query returns them")
    func everyRowInOrder() async throws {
        let sql = "SELECT g, repeat('x', g % 50), ARRAY[g::text, 'b'] FROM generate_series(1, $1::int) AS g"
        let (streamed, queried) = try await pool.withConnection { connection in
            let streamed = try await connection.reduceRows(sql, [5_000], into: [String]()) { seen, row in
                seen.append("\(try row.decode(Int.self, column: 0)) \(try row.decode(String.self, column: 1)) \(try row.decode([String].self, column: 2))")
            }
            let queried = try await connection.query(sql, [5_000]).map {
                "\(try $0.decode(Int.self, column: 0)) \(try $0.decode(String.self, column: 1)) \(try $0.decode([String].self, column: 2))"
            }
            return (streamed, queried)
        }
        #expect(streamed.count == 5_000)
        #expect(streamed == queried)
        #expect(try await pool.withConnection { try await $0.reduceRows("SELECT 1 WHERE false", into: 0) { count, _ in count += 1 } } == 0)
    }

    @Test("the statement's error comes after the rows before it, and the connection serves the next statement")
    func statementError() async throws {
        try await pool.withConnection { connection async throws in
            let error = await #expect(throws: PostgresError.self) {
                try await connection.reduceRows("SELECT 10 / (3 - g) FROM generate_series(1, 5) AS g", into: 0) { count, _ in count += 1 }
            }
            #expect(error?.sqlState == "22012")  // division_by_zero
            #expect(try await connection.query("SELECT 7").scalar(Int.self) == 7)
        }
    }

    @Test("an error thrown for a row stops the rows, the rest are dropped, and the connection serves the next statement")
    func bodyError() async throws {
        try await pool.withConnection { connection async throws in
            await #expect(throws: Stop.self) {
                try await connection.reduceRows("SELECT g FROM generate_series(1, 10000) AS g", into: 0) { count, row in
                    count += 1
                    if try row.decode(Int.self, column: 0) == 10 { throw Stop() }
                }
            }
            #expect(try await connection.query("SELECT 7").scalar(Int.self) == 7)
            #expect(try await connection.reduceRows("SELECT g FROM generate_series(1, 3) AS g", into: 0) { sum, row in sum += try row.decode(Int.self, column: 0) } == 6)
        }
    }

    @Test("in a transaction, the rows are those the transaction sees")
    func inTransaction() async throws {
        let table = "pg_temp." + TestDatabase.uniqueName("rows")
        let seen = try await pool.withTransaction { connection in
            // A table name made by uniqueName ([a-z0-9_]) is an identifier, not a value.
            try await connection.executeScript("CREATE TABLE \(table) (id int); INSERT INTO \(table) SELECT generate_series(1, 100)")
            return try await connection.reduceRows("SELECT id FROM \(table) ORDER BY id", [], into: [Int]()) { ids, row in
                ids.append(try row.decode(Int.self, column: 0))
            }
        }
        #expect(seen == Array(1...100))
    }
}
