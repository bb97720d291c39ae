import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Parameters and decoding")
struct ValueRoundTripTests {
    let pool = TestDatabase.pool

    @Test(
        "text parameters round-trip unchanged",
        arguments: [
            "plain",
            "it's \"quoted\"",
            #"back\slash \\ and \n not a newline"#,
            "line\nbreak\ttab",
            "unicode: Grüße, 你好, 🙂👍🏽, \u{200D}",
            "'; DROP TABLE users; --",
            "",
            "{braces,and,commas}",
        ]
    )
    func textRoundTrip(value: String) async throws {
        let rows = try await pool.query("SELECT $1::text AS value, length($1::text) AS length", [value])
        #expect(try rows[0].decode(String.self, column: "value") == value)
        #expect(try rows[0].decode(Int.self, column: "length") == value.unicodeScalars.count)
    }

    @Test("a very long string round-trips unchanged")
    func longString() async throws {
        let value = String(repeating: "abcdé🙂\\'\"", count: 200_000)
        let rows = try await pool.query("SELECT $1::text, md5($1::text)", [value])
        #expect(try rows.scalar(String.self) == value)
    }

    @Test("a NUL character is refused before it reaches the server")
    func nulCharacter() async throws {
        let error = await #expect(throws: PostgresError.self) {
            try await pool.query("SELECT $1::text", ["a\u{0}b"])
        }
        #expect(error?.code == .invalidValue)
    }

    @Test("text[] round-trips awkward elements and NULL")
    func textArrayRoundTrip() async throws {
        let values: [String?] = [
            "a,b", "say \"hi\"", "{braces}", #"back\slash"#, "with space", " ", "", nil, "NULL", "ü🙂",
        ]
        let rows = try await pool.query(
            "SELECT $1::text[] AS value, array_length($1::text[], 1) AS count, ($1::text[])[8] IS NULL AS eighth_is_null, ($1::text[])[9] AS ninth",
            [values]
        )
        #expect(try rows[0].decode([String?].self, column: "value") == values)
        #expect(try rows[0].decode(Int.self, column: "count") == values.count)
        #expect(try rows[0].decode(Bool.self, column: "eighth_is_null"))
        #expect(try rows[0].decode(String.self, column: "ninth") == "NULL")
    }

    @Test("text[] and timestamptz[] decode as [String] and [Date], NULL elements refused")
    func stringAndDateArrays() async throws {
        let texts = ["a,b", "say \"hi\"", #"back\slash"#, "", "ü🙂", String(repeating: "long id ", count: 40)]
        let rows = try await pool.query(
            """
            SELECT $1::text[], ARRAY['2024-02-29 23:59:58.123456+00', 'infinity', '-infinity', '1999-12-31 23:59:59+00']::timestamptz[],
                   ARRAY['x', NULL]::text[], '{}'::timestamptz[]
            """,
            [texts]
        )
        #expect(try rows[0].decode([String].self, column: 0) == texts)
        let dates = try rows[0].decode([Date].self, column: 1)
        #expect(dates.count == 4)
        #expect(abs(dates[0].timeIntervalSince(Date(timeIntervalSince1970: 1_709_251_198.123456))) < 0.000_001)
        #expect(dates[1] == .distantFuture && dates[2] == .distantPast)
        #expect(dates[3] == Date(timeIntervalSince1970: 946_684_799))
        #expect(throws: PostgresError.self) { try rows[0].decode([String].self, column: 2) }
        #expect(try rows[0].decode([String?].self, column: 2) == ["x", nil])
        #expect(try rows[0].decode([Date].self, column: 3) == [])
    }

    @Test("text[] read in place (PostgresTextElements) gives each element's bytes, NULL elements and other types refused")
    func textElementsInPlace() async throws {
        let texts = ["a,b", "say \"hi\"", "", "ü🙂", String(repeating: "long id ", count: 40)]
        let rows = try await pool.query(
            "SELECT $1::text[], '{}'::text[], ARRAY['x', NULL]::text[], ARRAY[1, 2]::int8[], ARRAY['v']::varchar[]", [texts])
        let elements = try rows[0].decode(PostgresTextElements.self, column: 0)
        #expect(elements.count == texts.count)
        var seen: [String] = []
        elements.forEach { seen.append(String(decoding: $0, as: UTF8.self)) }
        #expect(seen == texts)
        #expect(elements.strings == texts)
        #expect(try rows[0].decode(PostgresTextElements.self, column: 1).count == 0)
        #expect(throws: PostgresError.self) { try rows[0].decode(PostgresTextElements.self, column: 2) }
        #expect(throws: PostgresError.self) { try rows[0].decode(PostgresTextElements.self, column: 3) }
        #expect(try rows[0].decode(PostgresTextElements.self, column: 4).strings == ["v"])
    }

    @Test("the empty text[] round-trips")
    func emptyArray() async throws {
        let rows = try await pool.query("SELECT $1::text[], cardinality($1::text[])", [[String]()])
        #expect(try rows[0].decode([String].self, column: 0) == [])
        #expect(try rows[0].decode(Int.self, column: 1) == 0)
    }

    @Test("every supported type decodes into its Swift value")
    func decodesTypes() async throws {
        let rows = try await pool.query(
            """
            SELECT 42::int4 AS i4, 9000000000::int8 AS i8, true AS flag, 2.5::float8 AS f8,
                   '2024-02-29 23:59:58.123456+00'::timestamptz AS at,
                   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS id,
                   '{"b": [1, 2], "a": "x"}'::jsonb AS doc,
                   ARRAY['x', 'y']::text[] AS list, ARRAY[1, 2]::int8[] AS numbers,
                   NULL::text AS nothing
            """
        )
        let row = rows[0]
        #expect(try row.decode(Int32.self, column: "i4") == 42)
        #expect(try row.decode(Int.self, column: "i4") == 42)
        #expect(try row.decode(Int64.self, column: "i8") == 9_000_000_000)
        #expect(try row.decode(Bool.self, column: "flag") == true)
        #expect(try row.decode(Double.self, column: "f8") == 2.5)
        let expected = Date(timeIntervalSince1970: 1_709_251_198.123456)
        #expect(abs(try row.decode(Date.self, column: "at").timeIntervalSince(expected)) < 0.000_001)
        #expect(try row.decode(UUID.self, column: "id") == UUID(uuidString: "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"))
        #expect(try row.decode(PostgresJSON.self, column: "doc").text == #"{"a": "x", "b": [1, 2]}"#)
        #expect(try row.decode([String].self, column: "list") == ["x", "y"])
        #expect(try row.decode([Int].self, column: "numbers") == [1, 2])
        #expect(try row.decode(String?.self, column: "nothing") == nil)
    }

    @Test("typed parameters reach the server as their types")
    func typedParameters() async throws {
        let when = Date(timeIntervalSince1970: 1_700_000_000.654321)
        let id = UUID()
        let rows = try await pool.query(
            "SELECT $1 + 1, $2 AND true, $3 * 2, $4::timestamptz, $5::uuid, $6::jsonb ->> 'k', $7::int4",
            [41, true, 1.25, when, id, PostgresJSON(#"{"k": "v"}"#), Int32(7)]
        )
        let row = rows[0]
        #expect(try row.decode(Int.self, column: 0) == 42)
        #expect(try row.decode(Bool.self, column: 1))
        #expect(try row.decode(Double.self, column: 2) == 2.5)
        #expect(abs(try row.decode(Date.self, column: 3).timeIntervalSince(when)) < 0.000_001)
        #expect(try row.decode(UUID.self, column: 4) == id)
        #expect(try row.decode(String.self, column: 5) == "v")
        #expect(try row.decode(Int.self, column: 6) == 7)
    }

    @Test("asking for the wrong type is a clear error")
    func typeMismatch() async throws {
        let rows = try await pool.query("SELECT 'text'::text AS word, 1::int4 AS number, NULL::int4 AS missing")
        let mismatch = #expect(throws: PostgresError.self) { try rows[0].decode(Int.self, column: "word") }
        #expect(mismatch?.code == .typeMismatch)
        #expect(mismatch?.message.contains("word") == true)
        let wrongWay = #expect(throws: PostgresError.self) { try rows[0].decode(String.self, column: "number") }
        #expect(wrongWay?.code == .typeMismatch)
        let null = #expect(throws: PostgresError.self) { try rows[0].decode(Int.self, column: "missing") }
        #expect(null?.code == .unexpectedNull)
        #expect(try rows[0].decode(Int?.self, column: "missing") == nil)
        let noColumn = #expect(throws: PostgresError.self) { try rows[0].decode(Int.self, column: "absent") }
        #expect(noColumn?.code == .noSuchColumn)
    }
}
