import Postgres
import TestSupport
import Testing

/// Connections driven by socket readiness (`SocketPoller`, `LibPQConnection+Readiness.swift`):
/// what does not fit in one read or one write of the socket still travels whole, and many
/// calls wait at once without a thread each.
@Suite("Calls driven by socket readiness")
struct ReadinessTests {
    @Test("8 MiB of parameters out and 8 MiB of rows back travel whole, in a pipeline too")
    func largeStatements() async throws {
        let connection = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
        defer { Task { await connection.close() } }
        let size = 8 * 1024 * 1024
        let sent = String(repeating: "ab", count: size / 2)
        // The socket takes far less than 8 MiB at once: the send waits for it to drain,
        // reading what the server sends meanwhile.
        let row = try await connection.query("SELECT length($1::text), md5($1::text), repeat('x', $2::int)", [sent, size])[0]
        #expect(try row.decode(Int.self, column: 0) == size)
        #expect(try row.decode(String.self, column: 1) == (try await connection.query("SELECT md5(repeat('ab', $1::int))", [size / 2]).scalar(String.self)))
        #expect(try row.decode(String.self, column: 2).utf8.count == size)
        let lengths = try await connection.withPipeline { pipeline in
            for _ in 0..<3 { try pipeline.send("SELECT length($1::text)", [sent]) }
            var lengths: [Int] = []
            for _ in 0..<3 { lengths.append(try await pipeline.receive().scalar(Int.self)) }
            return lengths
        }
        #expect(lengths == [size, size, size])
        #expect(try await connection.query("SELECT 'after'").scalar(String.self) == "after")
    }

    @Test("40 calls that wait on the server at once each end when their statement does, on a pool of 40")
    func manyWaitsAtOnce() async throws {
        let pool = PostgresConnectionPool(
            configuration: TestDatabase.configuration, options: .init(maximumConnections: 40), logger: TestDatabase.logger)
        defer { Task { await pool.close() } }
        let clock = ContinuousClock()
        let started = clock.now
        // Each sleeps a different time: each answer must come as its own socket turns
        // readable, whatever the others do.
        let ends = try await withThrowingTaskGroup(of: (Int, Duration).self) { group in
            for index in 0..<40 {
                group.addTask {
                    try await pool.query("SELECT pg_sleep($1)", [0.2 + Double(index % 4) * 0.1])
                    return (index % 4, clock.now - started)
                }
            }
            return try await group.reduce(into: [Int: [Duration]]()) { $0[$1.0, default: []].append($1.1) }
        }
        for (step, durations) in ends {
            let expected = Duration.milliseconds(200 + step * 100)
            #expect(durations.allSatisfy { $0 >= expected }, "step \(step): \(durations)")
        }
        #expect(ends.values.flatMap { $0 }.max()! < .seconds(5))
    }
}
