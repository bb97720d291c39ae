import Foundation
import Postgres
import ReceiptsCore
@testable import ReceiptsLive
import ReceiptsStore
import TestSupport
import Testing

@Suite("Event hub")
struct EventHubTests {
    /// A store on the test database, a new tenant with the group "g" (members a and b), and a
    /// hub that is not run: the tests drive its refreshes themselves, as notifications would.
    struct Bed {
        let pool: PostgresConnectionPool
        let store: ReceiptsStore
        let tenant: String
        let hub: EventHub

        init(options: EventHub.Options = .init()) async throws {
            try await TestDatabase.ensureMigrated()
            var configuration = TestDatabase.configuration
            configuration.role = ReceiptsStore.serviceRole
            self.pool = PostgresConnectionPool(configuration: configuration, logger: TestDatabase.logger)
            self.store = ReceiptsStore(pool: self.pool, logger: TestDatabase.logger)
            self.tenant = TestDatabase.uniqueName("tenant")
            #expect(try await self.store.createTenant(id: self.tenant, name: "hub test", apiKeyHash: Array(self.tenant.utf8), tokenSecret: [1]))
            #expect(try await self.store.putChat(tenant: self.tenant, chat: "g", kind: .group, members: ["a", "b"]) == .created)
            let listener = PostgresListener(configuration: configuration, logger: TestDatabase.logger)
            self.hub = EventHub(store: self.store, listener: listener, options: options, logger: TestDatabase.logger)
        }

        /// Refreshes until the hub has everything committed.
        func catchUp() async { while await self.hub.refresh() != .upToDate {} }
    }

    @Test("a subscriber that falls too far behind is closed with a reason; one that keeps up is not")
    func slowSubscriberIsClosed() async throws {
        let bed = try await Bed(options: .init(maximumLag: 10))
        let (pool, store, tenant, hub) = (bed.pool, bed.store, bed.tenant, bed.hub)
        func catchUp() async { await bed.catchUp() }

        await catchUp()
        let start = try await hub.start(tenant: tenant, after: nil)
        let fast = hub.subscribe(.tenant(tenant), from: start).subscription
        let (slow, slowWakeups) = hub.subscribe(.user(tenant: tenant, user: "a"), from: start)
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
        let reason = try await slow.relay(slowWakeups, to: nil) { _, _ in }
        #expect(reason == .tooSlow)
        #expect(hub.subscriberCount == 2)
        slow.cancel()
        fast.cancel()
        #expect(hub.subscriberCount == 0)
        await pool.close()
    }
}
