import Foundation
import Postgres
import ReceiptsServer
import TestSupport
import Testing

/// DESIGN.md's out-of-order commits make the hub wait at a missing event id for whatever may
/// still commit it: only that, never transactions that cannot.
@Suite("Live events do not wait on strangers")
struct LiveEventStrangersTests {
    struct Rollback: Error {}

    @Test("after a rolled-back event id, a transaction open in another database and an idle one in this database do not hold live events back")
    func strangersDoNotHoldEventsBack() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            try await TestDatabase.withFreshDatabase { url in
                let elsewhere = PostgresConnectionPool(
                    configuration: PostgresConfiguration(connectionString: url, applicationName: "receipts-tests-stranger"),
                    logger: TestDatabase.logger)
                let idleHere = PostgresConnectionPool(configuration: TestDatabase.configuration, logger: TestDatabase.logger)
                try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                    // Two strangers with transaction ids, open for the rest of the test.
                    try await elsewhere.withTransaction { stranger in
                        _ = try await stranger.query("SELECT pg_current_xact_id()")
                        try await idleHere.withTransaction { idle in
                            _ = try await idle.query("SELECT pg_current_xact_id()")
                            // An event id taken and rolled back: a gap below every later id.
                            await #expect(throws: Rollback.self) {
                                try await TestDatabase.pool.withTransaction { writer in
                                    _ = try await writer.query("SELECT receipts.send_message($1, 'g', 'rolled-back', 'a', 'x')", [tenant.id])
                                    throw Rollback()
                                }
                            }
                            for round in 0..<3 {
                                let sent = ContinuousClock.now
                                let id = try await tenant.send(in: "g", from: "b", text: "round \(round)")
                                let event = await stream.next(within: .seconds(5))
                                let took = ContinuousClock.now - sent
                                #expect(event?["messageIds"] as? [String] == [id])
                                #expect(took < .milliseconds(500), "round \(round): the event took \(took)")
                            }
                        }
                    }
                }
                await elsewhere.close()
                await idleHere.close()
            }
        }
    }
}
