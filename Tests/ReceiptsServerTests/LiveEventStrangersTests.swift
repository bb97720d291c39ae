import Foundation
import Postgres
import ReceiptsServer
import TestSupport
import Testing

/// Out-of-order commits make the hub wait at a missing event id for whatever may
/// still commit it: only that, never transactions that cannot.
@Suite("Live events do not wait on strangers")
struct LiveEventStrangersTests {
    struct Rollback: Error {}

    /// The service runs on a database of its own: in the shared test database, another test's
    /// open transaction that took event ids (a send batch waiting on a lock, say) may
    /// rightly hold every hub back, which is not what this test is about.
    @Test("after a rolled-back event id, a transaction open in another database and an idle one in this database do not hold live events back")
    func strangersDoNotHoldEventsBack() async throws {
        try await TestDatabase.withFreshDatabase { serviceURL in
            try await TestService.run(configure: { $0.databaseURL = serviceURL }) { client in
                let tenant = try await client.createTenant()
                try await tenant.createChat("g", members: ["a", "b"])
                try await TestDatabase.withFreshDatabase { elsewhereURL in
                    let elsewhere = PostgresConnectionPool(
                        configuration: PostgresConfiguration(connectionString: elsewhereURL, applicationName: "receipts-tests-stranger"),
                        logger: TestDatabase.logger)
                    let here = PostgresConnectionPool(
                        configuration: PostgresConfiguration(connectionString: serviceURL, applicationName: "receipts-tests-here"),
                        logger: TestDatabase.logger)
                    try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                        // Two strangers with transaction ids, open for the rest of the test.
                        try await elsewhere.withTransaction { stranger in
                            _ = try await stranger.query("SELECT pg_current_xact_id()")
                            try await here.withTransaction { idle in
                                _ = try await idle.query("SELECT pg_current_xact_id()")
                                // An event id taken and rolled back: a gap below every later id.
                                await #expect(throws: Rollback.self) {
                                    try await here.withTransaction { writer in
                                        _ = try await writer.query(
                                            "SELECT receipts.send_message($1, 'g', 'rolled-back', 'a', 'x')", [tenant.id])
                                        throw Rollback()
                                    }
                                }
                                for round in 0..<3 {
                                    let sent = ContinuousClock.now
                                    let id = try await tenant.send(in: "g", from: "b", text: "round \(round)")
                                    let event = await stream.next(within: .seconds(5))
                                    let took = ContinuousClock.now - sent
                                    #expect(event?["messageIds"] as? [String] == [id])
                                    // Held back, it would wait the 5 s after which the hub
                                    // abandons a gap; live, it comes in milliseconds (up to a
                                    // second or so when the whole suite loads the machine).
                                    #expect(took < .seconds(2), "round \(round): the event took \(took)")
                                }
                            }
                        }
                    }
                    await elsewhere.close()
                    await here.close()
                }
            }
        }
    }
}
