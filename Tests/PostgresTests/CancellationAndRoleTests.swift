import Foundation
import NIOCore
import Postgres
import TestSupport
import Testing

@Suite("Cancellation, bounded waits and per-transaction roles")
struct CancellationAndRoleTests {
    /// A table of its own, and a connection holding an exclusive lock on it until `body` ends.
    func withLockedTable(_ body: (String) async throws -> Void) async throws {
        // In `public`: the test role's search path starts with its own schema, `receipts`,
        // whose tables a catalogue test checks.
        let table = "public." + TestDatabase.uniqueName("locked")
        // The table name is an identifier made by uniqueName ([a-z0-9_]), not a value.
        try await TestDatabase.pool.withConnection { _ = try await $0.executeScript("CREATE TABLE \(table) (id int)") }
        let holder = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
        do {
            try await holder.executeScript("BEGIN; LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE")
            try await body(table)
            try await holder.executeScript("ROLLBACK")
        } catch {
            await holder.close()
            throw error
        }
        await holder.close()
        try await TestDatabase.pool.withConnection { _ = try await $0.executeScript("DROP TABLE \(table)") }
    }

    @Test("a statement waiting for a lock is cancelled on the server when its task is cancelled")
    func cancelledTaskCancelsStatement() async throws {
        let name = TestDatabase.uniqueName("cancel")
        var configuration = TestDatabase.configuration
        configuration.applicationName = name
        let pool = PostgresConnectionPool(configuration: configuration, options: .init(maximumConnections: 1), logger: TestDatabase.logger)
        try await withLockedTable { table in
            let waiting = Task { try await pool.query("SELECT count(*) FROM \(table)", []) }
            // Until the server shows the statement waiting for the lock.
            let deadline = ContinuousClock.now + .seconds(10)
            while try await TestDatabase.pool.query(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", [name]
            ).scalar(Int.self) == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let cancelled = ContinuousClock.now
            waiting.cancel()
            let error = await #expect(throws: PostgresError.self) { try await waiting.value }
            #expect(error?.sqlState == PostgresError.SQLState.queryCanceled)
            #expect(error?.isUnavailability == true)
            #expect(ContinuousClock.now - cancelled < .seconds(2), "the statement still waited for the lock")
            // The lock is still held: the statement did not run, and the pool works on.
            #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
        }
        await pool.close()
    }

    @Test("a statement past statement_timeout fails with 57014, counted as unavailability")
    func statementTimeout() async throws {
        var configuration = TestDatabase.configuration
        configuration.settings = [(name: "statement_timeout", value: "300")]
        let pool = PostgresConnectionPool(configuration: configuration, options: .init(maximumConnections: 1), logger: TestDatabase.logger)
        try await withLockedTable { table in
            let started = ContinuousClock.now
            let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT count(*) FROM \(table)", []) }
            #expect(error?.sqlState == PostgresError.SQLState.queryCanceled)
            #expect(error?.isUnavailability == true)
            #expect(ContinuousClock.now - started < .seconds(3))
        }
        #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
        await pool.close()
    }

    @Test("the pool's watchdog cancels a call that waits on the server longer than unresponsiveCallTimeout")
    func watchdogCancelsSlowCalls() async throws {
        let pool = PostgresConnectionPool(
            configuration: TestDatabase.configuration,
            options: .init(maximumConnections: 1, unresponsiveCallTimeout: .milliseconds(300)),
            logger: TestDatabase.logger
        )
        try await withLockedTable { table in
            let started = ContinuousClock.now
            let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT count(*) FROM \(table)", []) }
            #expect(error?.sqlState == PostgresError.SQLState.queryCanceled)
            #expect(ContinuousClock.now - started < .seconds(2), "the call waited \(ContinuousClock.now - started)")
        }
        // The cancelled connection was not lent again; a new one answers.
        #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
        await pool.close()
    }

    @Test("leases wait at most leaseTimeout, and beyond maximumWaiters one more fails at once")
    func boundedWaiters() async throws {
        let pool = PostgresConnectionPool(
            configuration: TestDatabase.configuration,
            options: .init(maximumConnections: 1, leaseTimeout: .milliseconds(800), maximumWaiters: 2),
            logger: TestDatabase.logger
        )
        try await pool.withConnection { _ async throws in
            async let first: Void = { _ = try? await pool.query("SELECT 1") }()
            async let second: Void = { _ = try? await pool.query("SELECT 1") }()
            // Until both wait.
            while pool.usage.waiting < 2 { try await Task.sleep(for: .milliseconds(5)) }
            let started = ContinuousClock.now
            let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
            #expect(error?.code == .poolExhausted)
            #expect(error?.isUnavailability == true)
            #expect(ContinuousClock.now - started < .milliseconds(200))
            _ = await (first, second)
        }
        #expect(pool.usage.waiting == 0)
        #expect(try await pool.query("SELECT 2").scalar(Int.self) == 2)
        await pool.close()
    }

    @Test("with a role, every transaction takes it and nothing a transaction does to it outlives it")
    func roleIsPerTransaction() async throws {
        let role = TestDatabase.uniqueName("role")
        // A role name made by uniqueName ([a-z0-9_]) is an identifier, not a value.
        try await TestDatabase.pool.withConnection { _ = try await $0.executeScript("CREATE ROLE \(role) NOLOGIN; GRANT \(role) TO CURRENT_USER") }
        let login = try await TestDatabase.pool.query("SELECT session_user::text").scalar(String.self)
        var configuration = TestDatabase.configuration
        configuration.role = role
        let pool = PostgresConnectionPool(configuration: configuration, options: .init(maximumConnections: 1), logger: TestDatabase.logger)

        // A statement alone, a transaction, a script, a pipeline: each runs as the role.
        #expect(try await pool.query("SELECT current_user::text").scalar(String.self) == role)
        #expect(try await pool.withTransaction { try await $0.query("SELECT current_user::text").scalar(String.self) } == role)
        #expect(
            try await pool.withConnection { connection in
                try await connection.withPipeline { pipeline in
                    try pipeline.send("SELECT current_user::text", [])
                    // A statement that reads no table may go without it, beside those that take it.
                    try pipeline.sendWithoutRole("SELECT current_user::text", [])
                    try pipeline.send("SELECT current_user::text", [])
                    return [
                        try await pipeline.receive().scalar(String.self), try await pipeline.receive().scalar(String.self),
                        try await pipeline.receive().scalar(String.self),
                    ]
                }
            } == [role, login, role])
        // Rows one by one: alone (through the transaction that takes the role) and in a transaction.
        let asRole = try await pool.withConnection { connection in
            try await connection.reduceRows("SELECT current_user::text", into: [String]()) { $0.append(try $1.decode(String.self, column: 0)) }
        }
        #expect(asRole == [role])
        let inTransaction = try await pool.withTransaction { connection in
            try await connection.reduceRows("SELECT current_user::text", into: [String]()) { $0.append(try $1.decode(String.self, column: 0)) }
        }
        #expect(inTransaction == [role])

        // A transaction that drops the role has it back afterwards, on the same session.
        let (inside, pid) = try await pool.withTransaction { connection in
            try await connection.executeScript("RESET ROLE")
            return (try await connection.query("SELECT current_user::text").scalar(String.self), connection.backendPID)
        }
        #expect(inside == login)
        let (after, samePID) = try await pool.withConnection { connection in
            (try await connection.query("SELECT current_user::text").scalar(String.self), connection.backendPID)
        }
        #expect(samePID == pid)
        #expect(after == role)

        await pool.close()
        try await TestDatabase.pool.withConnection { _ = try await $0.executeScript("DROP ROLE \(role)") }
    }
}
