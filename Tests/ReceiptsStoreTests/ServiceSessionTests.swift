import Postgres
import ReceiptsStore
import TestSupport
import Testing

@Suite("The service's sessions")
struct ServiceSessionTests {
    @Test("statements and idle transactions are bounded by the database timeout")
    func timeouts() async throws {
        try await TestDatabase.ensureMigrated()
        let pool = PostgresConnectionPool(
            configuration: ReceiptsStore.serviceSessions(of: TestDatabase.configuration, timeout: .milliseconds(1500)),
            options: .init(maximumConnections: 1), logger: TestDatabase.logger)
        let row = try await pool.query(
            "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout'), current_user::text")
        #expect(try row[0].decode(String.self, column: 0) == "1500ms")
        #expect(try row[0].decode(String.self, column: 1) == "1500ms")
        #expect(try row[0].decode(String.self, column: 2) == ReceiptsStore.serviceRole)

        // A transaction left idle (a stuck request) is ended by the server, with its locks.
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { connection in
                try await connection.query("SELECT 1")
                try await Task.sleep(for: .seconds(2))
                try await connection.query("SELECT 2")
            }
        }
        #expect(error?.isUnavailability == true)
        // The pool replaces the session.
        #expect(try await pool.query("SELECT 3").scalar(Int.self) == 3)
        await pool.close()
    }
}
