import Foundation
import NIOCore
import Postgres
import TestSupport
import Testing

@Suite("Connection pool")
struct ConnectionPoolTests {
    func makePool(size: Int, leaseTimeout: TimeAmount = .seconds(30), maximumWaiters: Int = 1000) -> (PostgresConnectionPool, String) {
        let name = TestDatabase.uniqueName("pool")
        var configuration = TestDatabase.configuration
        configuration.applicationName = name
        let pool = PostgresConnectionPool(
            configuration: configuration,
            options: .init(maximumConnections: size, leaseTimeout: leaseTimeout, maximumWaiters: maximumWaiters),
            logger: TestDatabase.logger
        )
        return (pool, name)
    }

    func backendCount(applicationName: String) async throws -> Int {
        try await TestDatabase.pool.query(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            [applicationName]
        ).scalar(Int.self)
    }

    @Test("a pool of 4 serves 200 concurrent queries with at most 4 connections")
    func concurrentQueries() async throws {
        let (pool, name) = makePool(size: 4)
        let results = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for index in 0..<200 {
                group.addTask {
                    let rows = try await pool.query("SELECT $1::int8 * 2, pg_sleep(0.002)", [index])
                    return (index, try rows[0].decode(Int.self, column: 0))
                }
            }
            var results: [Int: Int] = [:]
            for try await (index, doubled) in group { results[index] = doubled }
            return results
        }
        #expect(results.count == 200)
        #expect(results.allSatisfy { $0.value == $0.key * 2 })
        #expect(pool.usage.open <= 4)
        #expect(try await backendCount(applicationName: name) <= 4)
        await pool.close()
        // The server ends a session shortly after the client hangs up.
        let deadline = ContinuousClock.now + .seconds(10)
        while try await backendCount(applicationName: name) > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(try await backendCount(applicationName: name) == 0)
    }

    @Test("a lease that waits longer than its timeout fails cleanly")
    func leaseTimeout() async throws {
        let (pool, _) = makePool(size: 1, leaseTimeout: .milliseconds(200))
        try await pool.withConnection { held async throws in
            let error = await #expect(throws: PostgresError.self) {
                try await pool.query("SELECT 1")
            }
            #expect(error?.code == .poolTimeout)
            #expect(try await held.query("SELECT 2").scalar(Int.self) == 2)
        }
        // Once the connection is back, leases succeed again.
        #expect(try await pool.query("SELECT 3").scalar(Int.self) == 3)
        #expect(pool.usage.waiting == 0)
        await pool.close()
    }

    @Test("beyond maximumWaiters, a lease fails at once with poolExhausted; the waiting ones are served")
    func exhaustedPool() async throws {
        let (pool, _) = makePool(size: 1, maximumWaiters: 2)
        let waiting = try await pool.withConnection { held async throws in
            let waiting = (0..<2).map { index in Task { try await pool.query("SELECT $1::int8", [index]).scalar(Int.self) } }
            while pool.usage.waiting < 2 { try await Task.sleep(for: .milliseconds(5)) }
            let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
            #expect(error?.code == .poolExhausted)
            #expect(try await held.query("SELECT 1").scalar(Int.self) == 1)
            #expect(pool.usage == (open: 1, leased: 1, waiting: 2))
            return waiting
        }
        // Handed back: both waiters get the connection in turn.
        for (index, lease) in waiting.enumerated() { #expect(try await lease.value == index) }
        #expect(pool.usage == (open: 1, leased: 0, waiting: 0))
        await pool.close()
    }

    @Test("a waiting lease whose task is cancelled fails with CancellationError at once, and the pool serves the next")
    func cancelledWaiter() async throws {
        let (pool, _) = makePool(size: 1)
        try await pool.withConnection { _ async throws in
            let lease = Task { try await pool.query("SELECT 1") }
            while pool.usage.waiting < 1 { try await Task.sleep(for: .milliseconds(5)) }
            lease.cancel()
            await #expect(throws: CancellationError.self) { try await lease.value }
            #expect(pool.usage.waiting == 0)
        }
        #expect(try await pool.query("SELECT 2").scalar(Int.self) == 2)
        #expect(pool.usage == (open: 1, leased: 0, waiting: 0))
        await pool.close()
    }

    @Test("closing fails the waiting leases with poolClosed, and closes a lent connection when it comes back")
    func closeWithWaitersAndLeases() async throws {
        let (pool, name) = makePool(size: 1)
        try await pool.withConnection { held async throws in
            let lease = Task { try await pool.query("SELECT 1") }
            while pool.usage.waiting < 1 { try await Task.sleep(for: .milliseconds(5)) }
            await pool.close()
            let error = await #expect(throws: PostgresError.self) { try await lease.value }
            #expect(error?.code == .poolClosed)
            // The lent connection still works until it comes back.
            #expect(try await held.query("SELECT 3").scalar(Int.self) == 3)
        }
        #expect(pool.usage == (open: 0, leased: 0, waiting: 0))
        let deadline = ContinuousClock.now + .seconds(10)
        while try await backendCount(applicationName: name) > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(try await backendCount(applicationName: name) == 0)
    }

    @Test("connections killed by pg_terminate_backend are replaced")
    func replacesTerminatedConnections() async throws {
        let (pool, name) = makePool(size: 2)
        // Open both connections.
        let pids = try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    try await pool.withConnection { connection in
                        try await connection.query("SELECT pg_sleep(0.2)")
                        return connection.backendPID
                    }
                }
            }
            return try await group.reduce(into: Set<Int32>()) { $0.insert($1) }
        }
        #expect(pids.count == 2)
        let terminated = try await TestDatabase.pool.query(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            [name]
        ).scalar(Int.self)
        #expect(terminated == 2)
        // pg_terminate_backend only signals; wait until the sessions are gone.
        while try await backendCount(applicationName: name) > 0 { try await Task.sleep(for: .milliseconds(10)) }

        // The pool checks a connection when lending it, but the server may still be closing
        // the socket: a statement on a dying connection can fail once per killed connection.
        // Both failures may come back to back (each killed connection once), so retry
        // until the two are used up; a third loss fails the test.
        var lostStatements = 0
        for index in 0..<10 {
            while true {
                do {
                    #expect(try await pool.query("SELECT $1::int8", [index]).scalar(Int.self) == index)
                    break
                } catch let error as PostgresError where error.isConnectionLoss && lostStatements < 2 {
                    lostStatements += 1
                }
            }
        }
        #expect(lostStatements <= 2)
        let newPIDs = try await TestDatabase.pool.query(
            "SELECT array_agg(pid) FROM pg_stat_activity WHERE application_name = $1",
            [name]
        ).scalar([Int32].self)
        #expect(!newPIDs.isEmpty)
        #expect(Set(newPIDs).isDisjoint(with: pids))
        await pool.close()
    }

    @Test("a connection lost in the middle of use is not reused")
    func lostConnectionIsDiscarded() async throws {
        let (pool, _) = makePool(size: 1)
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withConnection { connection in
                try await connection.query("SELECT pg_terminate_backend(pg_backend_pid())")
            }
        }
        #expect(error?.isConnectionLoss == true)
        #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
        await pool.close()
    }

    @Test("a closed pool refuses leases")
    func closedPool() async throws {
        let (pool, _) = makePool(size: 1)
        #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
        await pool.close()
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(error?.code == .poolClosed)
    }

    @Test("an unreachable server is a clear error naming the host")
    func unreachableServer() async throws {
        let configuration = PostgresConfiguration(connectionString: "postgresql://receipts@127.0.0.1:1/receipts", connectTimeoutSeconds: 2)
        let error = await #expect(throws: PostgresError.self) {
            _ = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
        }
        #expect(error?.code == .connectionFailed)
        #expect(error?.host == "127.0.0.1:1")
        #expect(error?.message.contains("127.0.0.1:1") == true)
    }

    @Test("a bad password is a clear error naming the host, without the password")
    func badPassword() async throws {
        guard var components = URLComponents(string: TestDatabase.url), components.host != nil else { return }
        components.password = "not-the-password"
        let configuration = PostgresConfiguration(connectionString: components.string!)
        let error = await #expect(throws: PostgresError.self) {
            _ = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
        }
        #expect(error?.code == .connectionFailed)
        #expect(error?.message.contains("\(components.host!):\(components.port ?? 5432)") == true)
        #expect(error?.message.contains("not-the-password") == false)
        #expect(error?.message.contains("password") == true)
    }
}
