import NIOCore
import Postgres
import TestSupport
import Testing

/// One deadline per lease, or per `PostgresDeadline` scope (an HTTP request): the wait for a
/// connection and every call on it end by it, and the server is told what is left.
@Suite("Lease deadlines")
struct LeaseDeadlineTests {
    func makePool(leaseTimeout: TimeAmount) -> PostgresConnectionPool {
        var configuration = TestDatabase.configuration
        configuration.applicationName = TestDatabase.uniqueName("deadline")
        return PostgresConnectionPool(
            configuration: configuration, options: .init(maximumConnections: 2, leaseTimeout: leaseTimeout), logger: TestDatabase.logger)
    }

    /// The session's `statement_timeout` in milliseconds, as a statement sees it.
    static let statementTimeout = "SELECT setting::int FROM pg_settings WHERE name = 'statement_timeout'"

    @Test("a transaction's and a single statement's statement_timeout is what their lease has left")
    func statementTimeoutIsTimeLeft() async throws {
        let pool = self.makePool(leaseTimeout: .seconds(3))
        let inTransaction = try await pool.withTransaction { connection in
            try await connection.query(Self.statementTimeout).scalar(Int.self)
        }
        #expect((2000...3000).contains(inTransaction), "statement_timeout in a transaction: \(inTransaction) ms")
        let alone = try await pool.query(Self.statementTimeout).scalar(Int.self)
        #expect((2000...3000).contains(alone), "statement_timeout of a single statement: \(alone) ms")
        await pool.close()
    }

    @Test("within a PostgresDeadline scope every lease shares the one deadline; a call past it fails by then")
    func scopeDeadline() async throws {
        let pool = self.makePool(leaseTimeout: .seconds(30))
        try await PostgresDeadline.within(.milliseconds(800)) { () async throws in
            #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
            let started = ContinuousClock.now
            let error = await #expect(throws: PostgresError.self) {
                try await pool.query("SELECT pg_sleep(5)")
            }
            let took = ContinuousClock.now - started
            // The server's statement_timeout or the pool's own timer, whichever first.
            #expect(error?.code == .deadlineExceeded || error?.sqlState == PostgresError.SQLState.queryCanceled, "\(String(describing: error))")
            #expect(error?.isUnavailability == true)
            #expect(took < .seconds(1.5), "the call ended \(took) after it began")
            // Past the deadline, a lease fails at once.
            let late = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
            #expect(late?.isUnavailability == true)
        }
        // Outside the scope, the pool's own deadline applies again.
        #expect(try await pool.query("SELECT 2").scalar(Int.self) == 2)
        await pool.close()
    }
}
