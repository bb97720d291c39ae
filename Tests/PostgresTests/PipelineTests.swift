import NIOCore
import Postgres
import TestSupport
import Testing

/// `PostgresConnection.withPipeline`: statements sent ahead of earlier answers, each its own
/// transaction, answered in order.
@Suite("Pipelined statements")
struct PipelineTests {
    /// A connection of its own, closed afterwards.
    func withConnection(_ body: (PostgresConnection) async throws -> Void) async throws {
        let connection = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
        do {
            try await body(connection)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }

    @Test("answers come in the order the statements were sent, with their own values")
    func answersInOrder() async throws {
        try await withConnection { connection in
            let answers = try await connection.withPipeline { pipeline in
                for value in 1...5 { try pipeline.send("SELECT $1::int8 * 10, $2::text", [value, "n\(value)"]) }
                #expect(pipeline.waiting == 5)
                var answers: [String] = []
                for _ in 1...5 {
                    let row = try await pipeline.receive()[0]
                    answers.append("\(try row.decode(Int.self, column: 0)) \(try row.decode(String.self, column: 1))")
                }
                return answers
            }
            #expect(answers == ["10 n1", "20 n2", "30 n3", "40 n4", "50 n5"])
            // Out of pipeline mode again: plain statements work.
            #expect(try await connection.query("SELECT 1").scalar(Int.self) == 1)
        }
    }

    @Test("a statement sent with a setting sees it in its transaction, and the next statement does not")
    func settingForOneStatement() async throws {
        try await withConnection { connection in
            let seen = try await connection.withPipeline { pipeline in
                try pipeline.send("SELECT current_setting('app.trace', true)", [], by: .now() + .seconds(5), setting: ("app.trace", "traced"))
                try pipeline.send("SELECT coalesce(current_setting('app.trace', true), '')", [], by: nil)
                return [try await pipeline.receive().scalar(String.self), try await pipeline.receive().scalar(String.self)]
            }
            #expect(seen == ["traced", ""])
        }
    }

    @Test("a failing statement fails alone: the ones before and after it commit")
    func failureAbortsNoOther() async throws {
        let table = TestDatabase.uniqueName("pipeline")
        try await withConnection { connection in
            try await connection.executeScript("CREATE TABLE \(table) (id int PRIMARY KEY)")
            let outcomes = try await connection.withPipeline { pipeline in
                for id in [1, 1, 2] { try pipeline.send("INSERT INTO \(table) VALUES ($1)", [id]) }
                var outcomes: [String] = []
                for _ in 0..<3 {
                    do throws(PostgresError) {
                        outcomes.append("inserted \(try await pipeline.receive().affectedRows)")
                    } catch {
                        outcomes.append(error.sqlState ?? "\(error)")
                    }
                }
                return outcomes
            }
            #expect(outcomes == ["inserted 1", PostgresError.SQLState.uniqueViolation, "inserted 1"])
            #expect(try await connection.query("SELECT array_agg(id ORDER BY id) FROM \(table)", []).scalar([Int].self) == [1, 2])
            try await connection.executeScript("DROP TABLE \(table)")
        }
    }

    @Test("a statement that does not parse fails each time it is sent, and those sent beside it run")
    func badStatement() async throws {
        try await withConnection { connection in
            let outcomes = try await connection.withPipeline { pipeline in
                try pipeline.send("SELEC $1::int", [1])
                try pipeline.send("SELECT $1::int", [2])
                try pipeline.send("SELEC $1::int", [3])
                var outcomes: [String] = []
                for _ in 0..<3 {
                    do throws(PostgresError) {
                        outcomes.append("\(try await pipeline.receive().scalar(Int.self))")
                    } catch {
                        outcomes.append(error.sqlState ?? "\(error)")
                    }
                }
                return outcomes
            }
            #expect(outcomes == ["42601", "2", "42601"])
            #expect(try await connection.query("SELECT 3").scalar(Int.self) == 3)
        }
    }

    @Test("answers left unread when the body returns are read, and the connection is ready for more")
    func unreadAnswers() async throws {
        try await withConnection { connection in
            try await connection.withPipeline { pipeline in
                try pipeline.send("SELECT pg_sleep(0.05)", [])
                try pipeline.send("SELECT 1/0", [])
            }
            #expect(try await connection.query("SELECT 'after'").scalar(String.self) == "after")
            #expect(try await connection.executeScript("BEGIN; COMMIT") == "COMMIT")
        }
    }
}
