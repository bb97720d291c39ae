import Foundation
import HTTPTypes
import Postgres
import ReceiptsServer
import TestSupport
import Testing

/// Streams and webhooks after a failover that lost events (docs/operations.md, "High availability"),
/// played in one database: the service runs on a database of its own, and the failover is
/// made in place as a promoted asynchronous standby would leave it (the events it never
/// received deleted, the event id sequence set back to where it had it, and a new event
/// history begun, which a promotion does by itself: sql/functions/histories.sql). The service
/// instance lives through it, as one does through a real failover. The Patroni tests
/// (scripts/ha-test.sh) do the same with real replication.
@Suite("Streams and webhooks after a failover that lost events")
struct LostHistoryTests {
    /// What a promoted standby that had every event up to `kept` (and the event id sequence
    /// there) holds, made in place: the later events gone, the sequence back, a webhook's
    /// position no later than `kept`, and a new event history.
    static func loseEvents(after kept: Int64, databaseURL: String) async throws {
        let connection = try await PostgresConnection.connect(
            to: PostgresConfiguration(connectionString: databaseURL), logger: TestDatabase.logger)
        do {
            try await connection.execute("DELETE FROM receipts.events WHERE event_id > $1", [kept])
            try await connection.execute("SELECT setval('receipts.event_ids', $1)", [kept])
            try await connection.execute(
                "UPDATE receipts.event_histories SET settled_through = least(settled_through, $1)", [kept])
            try await connection.execute(
                "UPDATE receipts.webhooks SET delivered_through = least(delivered_through, $1)", [kept])
            try await connection.execute("SELECT receipts.begin_event_history('a failover, played by a test')")
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }

    static func ids(_ events: [[String: Any]]) -> [String] { events.compactMap { $0["id"] as? String } }
    static func types(_ events: [[String: Any]]) -> [String] { events.compactMap { $0["type"] as? String } }
    /// The number an id begins with (ids are opaque to clients; the test shows the database
    /// really handed the numbers out again).
    static func number(_ id: String) -> Int64? { Int64(id.split(separator: ".")[0]) }

    @Test("no id names two events, streams open through it and resuming get every new event, after resync.required where they may hold lost ones")
    func streamsAndWebhooks() async throws {
        try await WebhookTests.withService { client, databaseURL in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b", "c"])
            try await tenant.createChat("quiet", members: ["c", "d"])
            let receiver = try await WebhookReceiver.start()
            #expect(try await WebhookTests.putWebhook("backend", url: receiver.url, tenant: tenant).status == .created)
            let dToken = try await tenant.token(for: "d")

            var before: [String] = []
            var keptId = ""
            var lostIds: [String] = []
            var newIds: [String] = []
            var earlyEvents: [[String: Any]] = []
            try await StreamClients.withEventSource(port: client.port, credential: tenant.apiKey) { live in
                try await StreamClients.withEventSource(port: client.port, credential: dToken) { quiet in
                    // Kept by the new primary: three messages and d's own.
                    for index in 0..<3 { try await tenant.send(in: "g", from: "a", text: "kept \(index)") }
                    try await tenant.send(in: "quiet", from: "c", text: "for d")
                    let kept = await live.take(4)
                    #expect(Self.types(kept) == Array(repeating: "message.created", count: 4))
                    #expect((await quiet.next())?["type"] as? String == "message.created")
                    keptId = try #require(kept.last?["id"] as? String)
                    // Lost with the old primary: three messages and a read, which only the
                    // tenant key's stream and the webhook see (d is in no such chat).
                    for index in 0..<3 { try await tenant.send(in: "g", from: "a", text: "lost \(index)") }
                    try await tenant.read(in: "g", by: "b")
                    let lost = await live.take(5)
                    #expect(Self.types(lost) == ["message.created", "message.created", "message.created", "receipt.read", "unread.changed"])
                    lostIds = Self.ids(lost)
                    before = Self.ids(kept) + lostIds
                    #expect(await receiver.waitForEvents(before.count).count == before.count)

                    try await Self.loseEvents(after: try #require(Self.number(keptId)), databaseURL: databaseURL)

                    // A client resuming with a lost id before anything new was written: told at
                    // once, then given every new event.
                    try await StreamClients.withEventSource(
                        port: client.port, credential: tenant.apiKey, lastEventID: lostIds[lostIds.count - 1]
                    ) { early in
                        let told = await early.next()
                        #expect(told?["type"] as? String == "resync.required")
                        #expect(told?["id"] as? String == keptId)
                        // The new primary hands out the same numbers again, for other events.
                        for index in 0..<3 { try await tenant.send(in: "g", from: "a", text: "new \(index)") }
                        try await tenant.send(in: "quiet", from: "c", text: "new for d")
                        earlyEvents = await early.take(4)
                    }
                    // The tenant key saw lost events: resync.required at the newest position the new
                    // primary kept, then every new event.
                    let after = await live.take(5)
                    #expect(Self.types(after) == ["resync.required"] + Array(repeating: "message.created", count: 4))
                    #expect(after.first?["id"] as? String == keptId)
                    newIds = Self.ids(Array(after.dropFirst()))
                    #expect(Set(newIds).isDisjoint(with: before))
                    #expect(Set(newIds.compactMap(Self.number)).isSubset(of: Set(lostIds.compactMap(Self.number))))
                    #expect(after.first.map { $0["sseId"] as? String == $0["id"] as? String } == true)
                    // d saw nothing that was lost: it goes on without a resync, nothing skipped.
                    let quietAfter = await quiet.next()
                    #expect(quietAfter?["type"] as? String == "message.created")
                    #expect(quietAfter?["id"] as? String == newIds.last)
                }
            }

            // The client that resumed before the new writes got every one of them after its resync.
            #expect(Self.ids(earlyEvents) == newIds)
            // A client that resumes from a position the new primary kept gets exactly what followed.
            try await StreamClients.withEventSource(port: client.port, credential: tenant.apiKey, lastEventID: keptId) { resumed in
                #expect(Self.ids(await resumed.take(4)) == newIds)
                try await tenant.send(in: "g", from: "a", text: "marker")
                #expect((await resumed.next())?["type"] as? String == "message.created")
            }
            // From a position that was lost: resync.required carrying the newest position the
            // new primary kept, then everything after it; never an event of the lost history.
            for lostId in [lostIds[0], lostIds[lostIds.count - 1]] {
                try await StreamClients.withEventSource(port: client.port, credential: tenant.apiKey, lastEventID: lostId) { resumed in
                    let first = await resumed.next()
                    #expect(first?["type"] as? String == "resync.required")
                    #expect(first?["id"] as? String == keptId)
                    #expect(Self.ids(await resumed.take(4)) == newIds)
                }
            }
            // An id no history of this database has: resync.required at the current position.
            try await StreamClients.withEventSource(port: client.port, credential: tenant.apiKey, lastEventID: "3.0123456789ab") { resumed in
                let first = await resumed.next()
                #expect(first?["type"] as? String == "resync.required")
                #expect(!before.contains(first?["id"] as? String ?? ""))
                try await tenant.send(in: "g", from: "a", text: "after resync")
                #expect((await resumed.next())?["type"] as? String == "message.created")
            }

            // The webhook was sent the lost events: resync.required before the first new event,
            // and no new event under an id it saw before.
            let requests = await receiver.wait { requests in
                let events = requests.flatMap(\.events)
                return events.contains { $0["type"] as? String == "resync.required" }
                    && newIds.allSatisfy { id in events.contains { $0["id"] as? String == id } }
            }
            let events = requests.flatMap(\.events)
            let resync = try #require(events.firstIndex { $0["type"] as? String == "resync.required" })
            #expect(Set(Self.ids(Array(events[..<resync]))).isSubset(of: Set(before)))
            let delivered = Self.ids(Array(events[(resync + 1)...]))
            #expect(Set(delivered).isDisjoint(with: before))
            #expect(Array(WebhookReceiver.distinctInOrder(delivered).prefix(newIds.count)) == newIds)
            let shown = try await client.request(.get, "/v1/webhooks/backend", as: tenant.apiKey)
            let lastEventId = (shown.json["delivery"] as? [String: Any])?["lastEventId"] as? String
            #expect(lastEventId.map { !before.contains($0) || $0 == keptId } == true)
            await receiver.stop()
        }
    }

    @Test("an instance that made none of the writes follows the failover too: its stream gets resync.required, then every new event")
    func anotherInstance() async throws {
        try await WebhookTests.withService { client, databaseURL in
            try await TestService.run(configure: { $0.databaseURL = databaseURL }) { other in
                let tenant = try await client.createTenant()
                try await tenant.createChat("g", members: ["a", "b"])
                // The other instance learns of a new tenant within a second.
                let deadline = ContinuousClock.now + .seconds(10)
                while try await other.request(.get, "/v1/chats/g", as: tenant.apiKey).status != .ok, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
                try await StreamClients.withEventSource(port: other.port, credential: tenant.apiKey) { live in
                    for index in 0..<2 { try await tenant.send(in: "g", from: "a", text: "kept \(index)") }
                    let kept = await live.take(2)
                    let keptId = try #require(kept.last?["id"] as? String)
                    for index in 0..<2 { try await tenant.send(in: "g", from: "a", text: "lost \(index)") }
                    let lost = await live.take(2)
                    #expect(lost.count == 2)
                    try await Self.loseEvents(after: try #require(Self.number(keptId)), databaseURL: databaseURL)
                    for index in 0..<2 { try await tenant.send(in: "g", from: "a", text: "new \(index)") }
                    let after = await live.take(3)
                    #expect(Self.types(after) == ["resync.required", "message.created", "message.created"])
                    #expect(after.first?["id"] as? String == keptId)
                    #expect(Set(Self.ids(Array(after.dropFirst()))).isDisjoint(with: Self.ids(kept + lost)))
                }
            }
        }
    }
}
