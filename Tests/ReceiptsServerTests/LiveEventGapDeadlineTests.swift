import Foundation
import Postgres
import ReceiptsServer
import TestSupport
import Testing

/// A transaction of our own database that took an event id and stays open (psql: `BEGIN;
/// SELECT receipts.mark_read(...);` then nothing) holds live events back only until the hub's
/// deadline; if it commits later its events come once, after the others, on live and resuming
/// streams alike (sql/functions/events.sql).
///
/// Each test runs on a database of its own: the open transaction would hold back the hubs of
/// every other test sharing the database until their (default) deadlines.
@Suite("Live events wait for an open transaction only until a deadline")
struct LiveEventGapDeadlineTests {
    struct Rollback: Error {}

    static let deadline = Duration.milliseconds(500)

    /// One event as the test compares them: type and message ids (ids checked apart).
    static func summary(_ event: [String: Any]) -> String {
        "\(event["type"] as? String ?? "?") \(event["chatId"] as? String ?? "?") \((event["messageIds"] as? [String] ?? []).joined(separator: ","))"
    }

    /// Runs `body` against a service on a fresh database with a short deadline, a tenant with
    /// chats `g` and `h` (members a and b; the open transaction works in `g` only, so writes
    /// in `h` take no lock it holds), and a pool of plain sessions like psql's.
    static func withService(
        deadline: Duration = Self.deadline,
        _ body: @Sendable (TestTenant, APIClient, PostgresConnectionPool, _ databaseURL: String) async throws -> Void
    ) async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestService.run(configure: {
                $0.databaseURL = url
                $0.abandonEventGapsAfter = deadline
            }) { client in
                let tenant = try await client.createTenant()
                try await tenant.createChat("g", members: ["a", "b"])
                try await tenant.createChat("h", members: ["a", "b"])
                let psql = PostgresConnectionPool(
                    configuration: PostgresConfiguration(connectionString: url, applicationName: "receipts-tests-psql"),
                    logger: TestDatabase.logger)
                do {
                    try await body(tenant, client, psql, url)
                } catch {
                    await psql.close()
                    throw error
                }
                await psql.close()
            }
        }
    }

    @Test("an open transaction holding event ids holds live events back only until the deadline; when it commits its events arrive once, after the others, live and on resume")
    func openTransactionThatCommits() async throws {
        try await Self.withService { tenant, client, psql, _ in
            let unread = try await tenant.send(in: "g", from: "a", text: "to be read in the open transaction")
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                let before = try await tenant.send(in: "h", from: "a", text: "before")
                let beforeEvent = try #require(await stream.next(within: .seconds(5)))
                #expect(Self.summary(beforeEvent) == "message.created h \(before)")
                let resumeFrom = try #require(beforeEvent["id"] as? String)

                var sentWhileOpen: [String] = []
                try await psql.withTransaction { session in
                    // Takes event ids (receipt.read, unread.changed) and stays open meanwhile.
                    _ = try await session.query("SELECT receipts.mark_read($1, 'g', 'b', NULL, NULL)", [tenant.id])
                    for round in 0..<3 {
                        let sent = ContinuousClock.now
                        let id = try await tenant.send(in: "h", from: "b", text: "while open \(round)")
                        sentWhileOpen.append(id)
                        let event = await stream.next(within: .seconds(5))
                        let took = ContinuousClock.now - sent
                        #expect(event.map(Self.summary) == "message.created h \(id)", "round \(round)")
                        #expect(took < Self.deadline + .milliseconds(1500), "round \(round): the event took \(took)")
                    }
                }
                // Committed now: its events come after the others, once.
                let late = await stream.take(2, within: .seconds(5)).map(Self.summary)
                #expect(late == ["receipt.read g \(unread)", "unread.changed g "])
                let after = try await tenant.send(in: "h", from: "a", text: "after")
                #expect(await stream.next(within: .seconds(5)).map(Self.summary) == "message.created h \(after)")
                #expect(await stream.next(within: .milliseconds(300)) == nil, "nothing more, nothing twice")

                let expected =
                    sentWhileOpen.map { "message.created h \($0)" } + ["receipt.read g \(unread)", "unread.changed g ", "message.created h \(after)"]
                // A stream resuming from before the open transaction took its ids gets every event once, in order.
                try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey, after: resumeFrom) { resumed, _ in
                    let replayed = await resumed.take(expected.count, within: .seconds(5))
                    #expect(replayed.map(Self.summary) == expected)
                    let ids = replayed.compactMap { $0["id"] as? String }.compactMap { Int64($0) }
                    #expect(ids == ids.sorted() && Set(ids).count == expected.count, "ids in order, none twice: \(ids)")
                    #expect(await resumed.next(within: .milliseconds(300)) == nil)
                }
            }
        }
    }

    @Test("an open transaction holding event ids that rolls back: live events moved on at the deadline, and nothing extra arrives")
    func openTransactionThatRollsBack() async throws {
        try await Self.withService { tenant, client, psql, _ in
            try await tenant.send(in: "g", from: "a", text: "to be read in the open transaction")
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                await #expect(throws: Rollback.self) {
                    try await psql.withTransaction { session in
                        _ = try await session.query("SELECT receipts.mark_read($1, 'g', 'b', NULL, NULL)", [tenant.id])
                        let sent = ContinuousClock.now
                        let id = try await tenant.send(in: "h", from: "b", text: "while open")
                        let event = await stream.next(within: .seconds(5))
                        let took = ContinuousClock.now - sent
                        #expect(event.map(Self.summary) == "message.created h \(id)")
                        #expect(took < Self.deadline + .milliseconds(1500), "the event took \(took)")
                        throw Rollback()
                    }
                }
                let after = try await tenant.send(in: "h", from: "a", text: "after")
                #expect(await stream.next(within: .seconds(5)).map(Self.summary) == "message.created h \(after)")
                #expect(await stream.next(within: .milliseconds(500)) == nil, "nothing of the rolled-back transaction")
            }
        }
    }

    @Test("a hub that starts while a transaction holds an event id is ready after the deadline, and relays what commits after that")
    func startWhileATransactionHoldsAnId() async throws {
        try await Self.withService { tenant, _, psql, url in
            try await tenant.send(in: "g", from: "a", text: "to be read in the open transaction")
            try await psql.withTransaction { session in
                _ = try await session.query("SELECT receipts.mark_read($1, 'g', 'b', NULL, NULL)", [tenant.id])
                // A second instance starts now (TestService.run waits until it is ready).
                try await TestService.run(configure: {
                    $0.databaseURL = url
                    $0.abandonEventGapsAfter = Self.deadline
                }) { second in
                    try await StreamClients.withWebSocket(port: second.port, credential: tenant.apiKey) { stream, _ in
                        let id = try await tenant.send(in: "h", from: "b", text: "while open")
                        #expect(await stream.next(within: .seconds(5)).map(Self.summary) == "message.created h \(id)")
                    }
                }
            }
        }
    }

    @Test("while a transaction given up on stays open, an id rolled back later holds live events back briefly, not for the whole deadline")
    func rolledBackIdBehindAnAbandonedTransaction() async throws {
        let deadline = Duration.seconds(3)
        try await Self.withService(deadline: deadline) { tenant, client, psql, _ in
            try await tenant.send(in: "g", from: "a", text: "to be read in the open transaction")
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                try await psql.withTransaction { session in
                    _ = try await session.query("SELECT receipts.mark_read($1, 'g', 'b', NULL, NULL)", [tenant.id])
                    let first = try await tenant.send(in: "h", from: "b", text: "held until the deadline")
                    #expect(await stream.next(within: deadline + .seconds(5)).map(Self.summary) == "message.created h \(first)")
                    // An event id taken and rolled back, while the open transaction still holds the event log.
                    await #expect(throws: Rollback.self) {
                        try await psql.withTransaction { writer in
                            _ = try await writer.query("SELECT receipts.send_message($1, 'h', 'rolled-back', 'a', 'x')", [tenant.id])
                            throw Rollback()
                        }
                    }
                    let sent = ContinuousClock.now
                    let second = try await tenant.send(in: "h", from: "b", text: "behind the rolled-back id")
                    #expect(await stream.next(within: .seconds(5)).map(Self.summary) == "message.created h \(second)")
                    let took = ContinuousClock.now - sent
                    #expect(took < deadline - .seconds(1), "the event took \(took)")
                }
            }
        }
    }
}
