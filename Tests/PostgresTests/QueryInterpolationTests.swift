import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Queries with interpolated values, rows read as tuples")
struct QueryInterpolationTests {
    @Test("each interpolated value becomes the next placeholder and is bound, never written into the SQL")
    func placeholders() async throws {
        let name = "O'Brien; DROP TABLE x; --"
        let query: PostgresQuery = "SELECT \(name)::text AS name, \(Int64(41)) + 1 AS answer, \(true) AS flag"
        #expect(query.sql == "SELECT $1::text AS name, $2 + 1 AS answer, $3 AS flag")
        #expect(query.binds.count == 3)
        let rows = try await TestDatabase.pool.query(query)
        let (text, answer, flag) = try #require(rows.first).decode((String, Int64, Bool).self)
        #expect(text == name)
        #expect(answer == 42)
        #expect(flag)
    }

    @Test("a row read as a tuple of another width is an error that says so; one column reads as its value")
    func width() async throws {
        let rows = try await TestDatabase.pool.query("SELECT 1::int8, 'two'::text")
        let row = try #require(rows.first)
        #expect(throws: PostgresError.self) { try row.decode((Int64, String, Bool).self) }
        #expect(throws: PostgresError.self) { try row.decode((Int64).self) }
        let single = try await TestDatabase.pool.query("SELECT \(Int64(7))::int8 UNION ALL SELECT 8")
        let values = try single.map { try $0.decode((Int64).self) }
        #expect(values == [7, 8])
    }
}
