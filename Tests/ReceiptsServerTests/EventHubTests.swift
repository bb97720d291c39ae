import Foundation
import Postgres
import ReceiptsCore
@testable import ReceiptsServer
import ReceiptsStore
import TestSupport
import Testing

@Suite("Event hub")
struct EventHubTests {
    @Test("a subscriber that falls too far behind is closed with a reason; one that keeps up is not")
    func slowSubscriberIsClosed() async throws {
        try await TestDatabase.ensureMigrated()
        var configuration = TestDatabase.configuration
        configuration.role = ReceiptsStore.serviceRole
        let pool = PostgresConnectionPool(configuration: configuration, logger: TestDatabase.logger)
        let store = ReceiptsStore(pool: pool, logger: TestDatabase.logger)
        let tenant = TestDatabase.uniqueName("tenant")
        #expect(try await store.createTenant(id: tenant, name: "hub test", apiKeyHash: Array(tenant.utf8), tokenSecret: [1]))
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: ["a", "b"]) == .created)
        // Not run: the test drives refreshes itself, as notifications would.
        let listener = PostgresListener(configuration: configuration, logger: TestDatabase.logger)
        let hub = EventHub(store: store, listener: listener, options: .init(maximumLag: 10), logger: TestDatabase.logger)
        func catchUp() async { while await hub.refresh() != .upToDate {} }

        await catchUp()
        let start = try await hub.start(tenant: tenant, after: nil)
        let fast = await hub.subscribe(.tenant(tenant), from: start)
        let slow = await hub.subscribe(.user(tenant: tenant, user: "a"), from: start)
        var received: [Int64] = []
        for round in 0..<6 {
            for index in 0..<4 {
                _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m\(round)-\(index)", sender: "b", text: "x")
            }
            await catchUp()
            while true {
                let batch = try await hub.nextEvents(for: fast)
                received += batch.events.map(\.id)
                if batch.isUpToDate { break }
            }
        }
        let logged = try await store.events(tenant: tenant, after: 0, through: .max, limit: 100).map(\.id)
        #expect(logged.count == 24)
        #expect(received == logged)
        await #expect(throws: EventHub.CloseReason.tooSlow) { try await hub.nextEvents(for: slow) }
        let reason = try await slow.relay(to: nil) { _, _ in }
        #expect(reason == .tooSlow)
        #expect(hub.subscriberCount == 2)
        slow.cancel()
        fast.cancel()
        #expect(hub.subscriberCount == 0)
        await pool.close()
    }
}
