import NIOCore
import Postgres
import TestSupport
import Testing

/// One deadline per `PostgresDeadline` scope (an HTTP request): the wait for a connection
/// and every call on it end by it, and the server is told what is left. Timings are loose
/// (the suite shares two cores); what is asserted is the deadline, not speed.
@Suite("Lease deadlines")
struct LeaseDeadlineTests {
    func makePool() -> PostgresConnectionPool {
        var configuration = TestDatabase.configuration
        configuration.applicationName = TestDatabase.uniqueName("deadline")
        return PostgresConnectionPool(
            configuration: configuration, options: .init(maximumConnections: 2, leaseTimeout: .seconds(30)), logger: TestDatabase.logger)
    }

    /// The session's `statement_timeout` in milliseconds, as a statement sees it.
    static let statementTimeout = "SELECT setting::int FROM pg_settings WHERE name = 'statement_timeout'"

    @Test("within a scope, a transaction's and a single statement's statement_timeout is the time left; outside, the session's")
    func statementTimeoutIsTimeLeft() async throws {
        let pool = self.makePool()
        try await PostgresDeadline.within(.seconds(20)) { () async throws in
            let inTransaction = try await pool.withTransaction { connection in
                try await connection.query(Self.statementTimeout, []).scalar(Int.self)
            }
            #expect((1...20_000).contains(inTransaction), "statement_timeout in a transaction: \(inTransaction) ms")
            let alone = try await pool.query(Self.statementTimeout, []).scalar(Int.self)
            #expect((1...inTransaction).contains(alone), "statement_timeout of a later single statement: \(alone) ms")
        }
        #expect(try await pool.query(Self.statementTimeout, []).scalar(Int.self) == 0)
        await pool.close()
    }

    @Test("within a PostgresDeadline scope every lease shares the one deadline; a call past it fails by then")
    func scopeDeadline() async throws {
        let pool = self.makePool()
        // Connected first, outside the scope: under a busy machine (the whole suite starting
        // at once) the connection alone can take a good part of the 3 s.
        #expect(try await pool.query("SELECT 0").scalar(Int.self) == 0)
        try await PostgresDeadline.within(.seconds(3)) { () async throws in
            #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
            let started = ContinuousClock.now
            let error = await #expect(throws: PostgresError.self) {
                try await pool.query("SELECT pg_sleep(30)")
            }
            let took = ContinuousClock.now - started
            // The server's statement_timeout or the pool's own timer, whichever first.
            #expect(error?.code == .deadlineExceeded || error?.sqlState == PostgresError.SQLState.queryCanceled, "\(String(describing: error))")
            #expect(error?.isUnavailability == true)
            #expect(took < .seconds(4), "the call ended \(took) after it began")
            // Past the deadline, a lease fails at once.
            let late = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
            #expect(late?.isUnavailability == true)
        }
        // Outside the scope, calls are not bounded by it.
        #expect(try await pool.query("SELECT 2").scalar(Int.self) == 2)
        await pool.close()
    }
}
