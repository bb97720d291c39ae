import Foundation
import NIOConcurrencyHelpers
import Postgres
import ReceiptsCore
@testable import ReceiptsLive
import ReceiptsStore
import TestSupport
import Testing

/// The hub's bounds: recent events by bytes, and a catch-up from the log that retention
/// overtakes.
@Suite("Event hub limits")
struct EventHubLimitsTests {
    /// A store as the service has it, a tenant with chat "g" of `members`, and a hub the test
    /// drives itself (its listener is not run: the test refreshes, as notifications would).
    static func hub(options: EventHub.Options, members: [String]) async throws -> (EventHub, ReceiptsStore, String, PostgresConnectionPool) {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "hub_limits")
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: members) == .created)
        let listener = PostgresListener(configuration: TestDatabase.configuration, logger: TestDatabase.logger)
        return (EventHub(store: store, listener: listener, options: options, logger: TestDatabase.logger), store, tenant, pool)
    }

    static func catchUp(_ hub: EventHub) async {
        while await hub.refresh() != .upToDate {}
    }

    /// Everything a subscription gets until it is up to date: event ids, and resync ids.
    static func drain(_ hub: EventHub, _ subscription: EventSubscription) async throws -> (events: [Int64], resyncs: [Int64]) {
        var events: [Int64] = []
        var resyncs: [Int64] = []
        while true {
            let batch = try await hub.nextEvents(for: subscription)
            if let resync = batch.resync { resyncs.append(resync.position) }
            events += batch.events.map(\.id)
            if batch.isUpToDate { return (events, resyncs) }
        }
    }

    @Test("recent events are bounded by bytes too: events with large audiences push older ones out to the log, and nothing is lost")
    func recentEventsByBytes() async throws {
        let members = (0..<200).map { "member-with-a-longish-id-\($0)" }
        let (hub, store, tenant, pool) = try await Self.hub(options: .init(recentEvents: 1000, recentEventBytes: 64 * 1024), members: members)
        await Self.catchUp(hub)
        let start = try await hub.start(tenant: tenant, after: nil)
        let behind = hub.subscribe(.tenant(tenant), from: start).subscription
        for index in 0..<20 {
            _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m\(index)", sender: members[0], text: "x")
        }
        await Self.catchUp(hub)
        let (held, bytes) = hub.log.withMirror { fanOut, _ in (fanOut.feeds[tenant]?.recent.count ?? 0, fanOut.feeds[tenant]?.recentBytes ?? 0) }
        // Each event carries 200 members (some 15 KiB counted): a few fit in 64 KiB, not 20.
        #expect(held > 0 && held < 20, "\(held) events held")
        #expect(bytes <= 64 * 1024)
        // The subscriber that was behind reads the rest from the log: all 20, in order, once.
        let logged = try await store.events(tenant: tenant, after: 0, through: .max, limit: 100).map(\.id)
        let received = try await Self.drain(hub, behind)
        #expect(received.events == logged)
        #expect(logged.count == 20)
        behind.cancel()
        await pool.close()
    }

    @Test("a stream catching up from the log gets resync.required when retention deletes the next events between two pages")
    func catchUpOvertakenByRetention() async throws {
        let (hub, store, tenant, pool) = try await Self.hub(options: .init(pageSize: 2), members: ["a", "b"])
        await Self.catchUp(hub)
        let before = try await store.eventLogPosition(tenant: tenant).lastAllocated
        for index in 0..<6 {
            _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m\(index)", sender: "a", text: "x")
        }
        await Self.catchUp(hub)
        let logged = try await store.events(tenant: tenant, after: 0, through: .max, limit: 100).map(\.id)
        try #require(logged.count == 6)
        // A stream resuming from before the six: it reads them from the log, two at a time.
        let resumed = try await hub.start(tenant: tenant, after: String(before))
        #expect(resumed.resync == nil)
        let subscription = hub.subscribe(.tenant(tenant), from: resumed).subscription
        let first = try await hub.nextEvents(for: subscription)
        #expect(first.events.map(\.id) == Array(logged.prefix(2)))
        // Retention deletes the next two before the stream reads them.
        try await TestDatabase.pool.execute(
            "UPDATE receipts.events SET occurred_at = now() - interval '2 days' WHERE tenant_id = $1 AND event_id <= $2",
            [tenant, logged[3]])
        try await TestDatabase.pool.query("SELECT receipts.prune_events(interval '1 day')")
        let rest = try await Self.drain(hub, subscription)
        #expect(rest.resyncs.count == 1, "\(rest)")
        #expect(!rest.events.contains(logged[2]) && !rest.events.contains(logged[3]))
        // After the resync the stream goes on with what comes next.
        _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "after", sender: "a", text: "x")
        await Self.catchUp(hub)
        let next = try await Self.drain(hub, subscription)
        let newest = try await store.events(tenant: tenant, after: 0, through: .max, limit: 100).map(\.id).last
        #expect(next.events == [newest].compactMap { $0 })
        subscription.cancel()
        await pool.close()
    }
}
