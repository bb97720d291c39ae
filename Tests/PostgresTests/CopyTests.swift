import Foundation
import NIOCore
import Postgres
import TestSupport
import Testing

/// `PostgresConnection.copyFrom`: `COPY … FROM STDIN` with data written as it is produced,
/// and `PostgresCopyText`'s fields.
@Suite("COPY FROM STDIN")
struct CopyTests {
    /// A connection of its own, closed afterwards (its temporary tables with it).
    func withConnection(
        _ configuration: PostgresConfiguration = TestDatabase.configuration, _ body: (PostgresConnection) async throws -> Void
    ) async throws {
        let connection = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
        do {
            try await body(connection)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }

    /// One text-format row of `fields`.
    static func row(_ fields: String?...) -> [UInt8] {
        var row: [UInt8] = []
        for (index, field) in fields.enumerated() {
            if index > 0 { row.append(PostgresCopyText.fieldSeparator) }
            PostgresCopyText.appendField(field, to: &row)
        }
        row.append(PostgresCopyText.rowEnd)
        return row
    }

    struct ProducerFailure: Error {}

    @Test("100,000 rows copied in a transaction, one write each, are all there")
    func manyRows() async throws {
        try await withConnection { connection in
            let count = try await connection.withTransaction { connection in
                try await connection.executeScript("CREATE TEMP TABLE copied (id int PRIMARY KEY, note text) ON COMMIT DROP")
                let copied = try await connection.copyFrom("COPY copied (id, note) FROM STDIN") { writer in
                    for id in 1...100_000 { try await writer.write("\(id)\tnote \(id)\n") }
                }
                #expect(copied == 100_000)
                return try await connection.query("SELECT count(*), sum(id) FROM copied").first.map {
                    [try $0.decode(Int.self, column: 0), try $0.decode(Int.self, column: 1)]
                }
            }
            #expect(count == [100_000, 100_000 * 100_001 / 2])
        }
    }

    @Test("text fields with tabs, newlines, backslashes, \\N and NULL come back as written")
    func textEscaping() async throws {
        let notes: [String?] = [
            "plain", "a\tb", "line\nbreak", "carriage\rreturn", "back\\slash", "\\N", "\\", "", nil, "\\.", "ünïcødé 🙂", "\t\n\\\r",
        ]
        try await withConnection { connection in
            try await connection.executeScript("CREATE TEMP TABLE escaped (id int PRIMARY KEY, note text)")
            let copied = try await connection.copyFrom("COPY escaped (id, note) FROM STDIN") { writer in
                for (id, note) in notes.enumerated() { try await writer.write(Self.row(String(id), note)) }
            }
            #expect(copied == notes.count)
            let rows = try await connection.query("SELECT note FROM escaped ORDER BY id")
            #expect(try rows.map { try $0.decode(String?.self, column: 0) } == notes)
        }
    }

    @Test("a bad row fails with its SQLSTATE, the transaction rolls back and the connection works on")
    func badRow() async throws {
        try await withConnection { connection in
            try await connection.executeScript("CREATE TEMP TABLE numbers (id int, note text)")
            try await connection.executeScript("BEGIN")
            try await connection.execute("INSERT INTO numbers VALUES (0, 'before')", [])
            let error = await #expect(throws: PostgresError.self) {
                try await connection.copyFrom("COPY numbers FROM STDIN") { writer in
                    try await writer.write(Self.row("1", "fine"))
                    try await writer.write(Self.row("two", "not a number"))
                    // The server has failed the COPY by now, and drops what follows.
                    for id in 3...50_000 { try await writer.write(Self.row(String(id), "after")) }
                }
            }
            #expect(error?.code == .server)
            #expect(error?.sqlState == "22P02")
            #expect(error?.message.contains("two") == true)
            // In the caller's transaction, which the failure aborted.
            let aborted = await #expect(throws: PostgresError.self) { try await connection.query("SELECT 1") }
            #expect(aborted?.sqlState == "25P02")
            try await connection.executeScript("ROLLBACK")
            #expect(try await connection.query("SELECT count(*) FROM numbers").scalar(Int.self) == 0)

            // Outside a transaction: nothing copied, and no transaction to roll back.
            await #expect(throws: PostgresError.self) {
                try await connection.copyFrom("COPY numbers FROM STDIN") { writer in
                    try await writer.write(Self.row("1", "fine"))
                    try await writer.write(Self.row("1", "too", "many"))
                }
            }
            #expect(try await connection.query("SELECT count(*) FROM numbers").scalar(Int.self) == 0)
            #expect(try await connection.copyFrom("COPY numbers FROM STDIN") { try await $0.write(Self.row("7", "seven")) } == 1)
            #expect(try await connection.query("SELECT count(*) FROM numbers").scalar(Int.self) == 1)
        }
    }

    @Test("a producer that throws aborts the COPY: nothing is copied and the connection works on")
    func producerFails() async throws {
        try await withConnection { connection in
            try await connection.executeScript("CREATE TEMP TABLE aborted (id int, note text)")
            await #expect(throws: ProducerFailure.self) {
                try await connection.copyFrom("COPY aborted FROM STDIN") { writer in
                    // More than one piece: some rows have reached the server already.
                    for id in 1...20_000 { try await writer.write(Self.row(String(id), "row \(id)")) }
                    throw ProducerFailure()
                }
            }
            #expect(try await connection.query("SELECT count(*) FROM aborted").scalar(Int.self) == 0)
            #expect(try await connection.query("SELECT 1").scalar(Int.self) == 1)

            // In a transaction: aborted too, and the transaction with it.
            await #expect(throws: ProducerFailure.self) {
                try await connection.withTransaction { connection in
                    try await connection.copyFrom("COPY aborted FROM STDIN") { writer in
                        try await writer.write(Self.row("1", "one"))
                        throw ProducerFailure()
                    }
                }
            }
            #expect(try await connection.query("SELECT count(*) FROM aborted").scalar(Int.self) == 0)
        }
    }

    @Test("a statement that is not COPY FROM STDIN is refused, and the connection works on")
    func notACopy() async throws {
        try await withConnection { connection in
            let error = await #expect(throws: PostgresError.self) {
                try await connection.copyFrom("SELECT 1") { try await $0.write("1\n") }
            }
            #expect(error?.code == .invalidValue)
            let missing = await #expect(throws: PostgresError.self) {
                try await connection.copyFrom("COPY no_such_table FROM STDIN") { try await $0.write("1\n") }
            }
            #expect(missing?.sqlState == PostgresError.SQLState.undefinedTable)
            let one = try await connection.query("SELECT 1").scalar(Int.self)
            #expect(one == 1)
        }
    }

    @Test("a COPY in a pooled transaction commits with it")
    func pooledTransaction() async throws {
        let pool = TestDatabase.pool
        // In `public`: the test role's search path starts with its own schema, `receipts`,
        // whose tables a catalogue test checks. The name is made by uniqueName ([a-z0-9_]).
        let table = "public." + TestDatabase.uniqueName("copied")
        try await pool.withConnection { _ = try await $0.executeScript("CREATE TABLE \(table) (id int PRIMARY KEY, note text)") }
        let outcome: Result<(copied: Int, count: Int), any Error>
        do {
            // Within a deadline: each write is a call bounded by it.
            let copied = try await PostgresDeadline.within(.seconds(30)) {
                try await pool.withTransaction { connection in
                    try await connection.execute("INSERT INTO \(table) VALUES (0, 'inserted')", [])
                    return try await connection.copyFrom("COPY \(table) FROM STDIN") { writer in
                        for id in 1...100_000 { try await writer.write(Self.row(String(id), "copied")) }
                    }
                }
            }
            outcome = .success((copied, try await pool.query("SELECT count(*) FROM \(table)", []).scalar(Int.self)))
        } catch {
            outcome = .failure(error)
        }
        try await pool.withConnection { _ = try await $0.executeScript("DROP TABLE \(table)") }
        let (copied, count) = try outcome.get()
        #expect(copied == 100_000)
        #expect(count == 100_001)
    }

    @Test("a producer that takes its time between writes is no slow call to the pool's watchdog")
    func slowProducer() async throws {
        let pool = PostgresConnectionPool(
            configuration: TestDatabase.configuration,
            options: .init(maximumConnections: 1, unresponsiveCallTimeout: .milliseconds(300)),
            logger: TestDatabase.logger
        )
        let counted = try await pool.withConnection { connection in
            try await connection.executeScript("CREATE TEMP TABLE slow (id int, note text)")
            let copied = try await connection.copyFrom("COPY slow FROM STDIN") { writer in
                // Each pause is longer than the watchdog lets a call wait on the server, and
                // comes after data was sent (more than one piece) with the COPY under way.
                for round in 0..<2 {
                    for id in 0..<5_000 { try await writer.write(Self.row(String(round * 5_000 + id), "row")) }
                    try await Task.sleep(for: .milliseconds(900))
                }
            }
            let counted = try await connection.query("SELECT count(*) FROM slow").scalar(Int.self)
            try await connection.executeScript("DROP TABLE slow")
            return [copied, counted]
        }
        await pool.close()
        #expect(counted == [10_000, 10_000])
    }

    @Test("a deadline that passes between two writes ends the COPY, and its connection is not lent again")
    func deadlineBetweenWrites() async throws {
        let pool = PostgresConnectionPool(configuration: TestDatabase.configuration, options: .init(maximumConnections: 1), logger: TestDatabase.logger)
        var firstBackend: Int32 = 0
        let error = await #expect(throws: PostgresError.self) {
            try await PostgresDeadline.within(.milliseconds(700)) {
                try await pool.withConnection { connection in
                    firstBackend = connection.backendPID
                    try await connection.executeScript("CREATE TEMP TABLE late (id int, note text)")
                    try await connection.copyFrom("COPY late FROM STDIN") { writer in
                        try await writer.write(Self.row("1", "in time"))
                        try await Task.sleep(for: .milliseconds(1_000))
                        // A piece to send: a call, past the deadline.
                        for id in 2...5_000 { try await writer.write(Self.row(String(id), "late")) }
                    }
                }
            }
        }
        #expect(error?.code == .deadlineExceeded)
        let backend = try await pool.query("SELECT pg_backend_pid()").scalar(Int32.self)
        #expect(backend != firstBackend)
        await pool.close()
    }

    @Test("outside a transaction, a COPY takes the session's role and the call's statement timeout")
    func sessionPolicy() async throws {
        let role = TestDatabase.uniqueName("copier")
        // A role name made by uniqueName ([a-z0-9_]) is an identifier, not a value.
        try await TestDatabase.pool.withConnection { _ = try await $0.executeScript("CREATE ROLE \(role) NOLOGIN; GRANT \(role) TO CURRENT_USER") }
        var configuration = TestDatabase.configuration
        configuration.role = role
        let pool = PostgresConnectionPool(configuration: configuration, options: .init(maximumConnections: 1), logger: TestDatabase.logger)
        let seen: [[String]] = try await PostgresDeadline.within(.seconds(30)) {
            try await pool.withConnection { connection in
                // Its defaults are filled in by the COPY's own transaction.
                try await connection.executeScript(
                    "CREATE TEMP TABLE who (id int, role text DEFAULT current_user, timeout text DEFAULT current_setting('statement_timeout'))")
                let copied = try await connection.copyFrom("COPY who (id) FROM STDIN") { writer in
                    for id in 1...3 { try await writer.write("\(id)\n") }
                }
                #expect(copied == 3)
                let rows = try await connection.query("SELECT DISTINCT role, timeout FROM who")
                try await connection.executeScript("DROP TABLE who")
                return try rows.map { [try $0.decode(String.self, column: 0), try $0.decode(String.self, column: 1)] }
            }
        }
        await pool.close()
        try await TestDatabase.pool.withConnection { _ = try await $0.executeScript("DROP ROLE \(role)") }
        #expect(seen.count == 1)
        #expect(seen.first?.first == role)
        // The deadline's time left, set for the COPY's transaction (not the session's default, 0).
        #expect(seen.first?.last != "0")
    }

    @Test("PostgresCopyText's text, text[] and timestamptz fields round-trip through a COPY")
    func copyTextFields() async throws {
        // Microseconds since 1970, each read back as such (each one a `Date` can hold exactly):
        // 1970, 2024, just before 1970, before 1970 by a day and a microsecond, 9999, 2 BC.
        let times: [Int64] = [0, 1_714_566_896_789_012, -1, -86_400_000_001, 253_402_300_799_500_000, -62_167_219_201_000_000]
        let arrays: [[String]] = [
            [], ["a", "b"], [""], ["NULL"], ["with,comma", "{braces}", "\"quoted\""], ["back\\slash", "tab\there", "new\nline\r"], ["\\N"],
        ]
        let notes: [String?] = ["one", nil, "tab\tand\\", "", "\\N", "\n", "last"]
        try await withConnection { connection in
            try await connection.executeScript("CREATE TEMP TABLE fields (id int, note text, tags text[], at timestamptz)")
            let copied = try await connection.copyFrom("COPY fields FROM STDIN") { writer in
                var row: [UInt8] = []
                for id in 0..<max(times.count, arrays.count) {
                    row.removeAll(keepingCapacity: true)
                    PostgresCopyText.appendField(String(id), to: &row)
                    row.append(PostgresCopyText.fieldSeparator)
                    PostgresCopyText.appendField(notes[id % notes.count], to: &row)
                    row.append(PostgresCopyText.fieldSeparator)
                    PostgresCopyText.appendArrayField(arrays[id % arrays.count], to: &row)
                    row.append(PostgresCopyText.fieldSeparator)
                    let microseconds = times[id % times.count]
                    PostgresCopyText.appendTimestampField(Date(timeIntervalSince1970: Double(microseconds) / 1_000_000), to: &row)
                    row.append(PostgresCopyText.rowEnd)
                    try await writer.write(row)
                }
            }
            #expect(copied == max(times.count, arrays.count))
            let rows = try await connection.query(
                "SELECT id, note, tags, (extract(epoch FROM at) * 1000000)::int8 FROM fields ORDER BY id")
            for row in rows {
                let id = try row.decode(Int.self, column: 0)
                #expect(try row.decode(String?.self, column: 1) == notes[id % notes.count])
                #expect(try row.decode([String].self, column: 2) == arrays[id % arrays.count])
                #expect(try row.decode(Int64.self, column: 3) == times[id % times.count], "row \(id)")
            }
        }
    }

    @Test("timestamps are ISO 8601 in UTC with microseconds; years before 1 are BC")
    func timestampText() {
        func text(_ seconds: Double) -> String {
            var buffer: [UInt8] = []
            PostgresCopyText.appendTimestampField(Date(timeIntervalSince1970: seconds), to: &buffer)
            return String(decoding: buffer, as: UTF8.self)
        }
        #expect(text(1_714_566_896.789012) == "2024-05-01T12:34:56.789012Z")
        #expect(text(-0.000001) == "1969-12-31T23:59:59.999999Z")
        #expect(text(-62_135_596_800) == "0001-01-01T00:00:00.000000Z")
        #expect(text(-62_135_596_800 - 1) == "0001-12-31T23:59:59.000000Z BC")
        #expect(text(.infinity) == "infinity")
    }
}
