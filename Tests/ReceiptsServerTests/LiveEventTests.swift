import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import Postgres
import ReceiptsServer
import TestSupport
import Testing

@Suite("Live events over WebSocket and SSE")
struct LiveEventTests {
    @Test("the sender's WebSocket receives receipt.read for a read made through HTTP, and nobody else's stream does")
    func senderSeesRead() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let other = try await client.createTenant(name: "other")
            try await tenant.createChat("dm", kind: "direct", members: ["alice", "bob"])
            try await tenant.createChat("elsewhere", members: ["carol", "dave"])
            let aliceToken = try await tenant.token(for: "alice")
            let carolToken = try await tenant.token(for: "carol")

            try await StreamClients.withWebSocket(port: client.port, credential: aliceToken) { alice, _ in
                try await StreamClients.withWebSocket(port: client.port, credential: carolToken) { carol, _ in
                    try await StreamClients.withWebSocket(port: client.port, credential: other.apiKey) { otherTenant, _ in
                        let id = try await tenant.send(in: "dm", from: "alice")
                        let created = await alice.next()
                        #expect(created?["type"] as? String == "message.created")
                        #expect(created?["messageIds"] as? [String] == [id])
                        try await tenant.read(in: "dm", by: "bob")
                        let read = await alice.next()
                        #expect(read?["type"] as? String == "receipt.read")
                        #expect(read?["chatId"] as? String == "dm")
                        #expect(read?["userId"] as? String == "bob")
                        #expect(read?["messageIds"] as? [String] == [id])
                        #expect((read?["id"] as? String).map { $0.count <= 64 } == true)
                        #expect(read?["at"] as? String != nil)

                        // Carol and the other tenant see their own events first: nothing of "dm" came before.
                        try await tenant.send(in: "elsewhere", from: "dave")
                        #expect((await carol.next())?["chatId"] as? String == "elsewhere")
                        try await other.createChat("x", members: ["y"])
                        try await other.send(in: "x", from: "y")
                        #expect((await otherTenant.next())?["chatId"] as? String == "x")
                    }
                }
            }
        }
    }

    @Test("one read-all over 300 messages is one receipt.read event, and the reader's devices get unread.changed")
    func oneEventForReadAll() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("busy", kind: "direct", members: ["a", "b"])
            var ids: [String] = []
            for index in 0..<300 { ids.append(try await tenant.send(in: "busy", from: "a", text: "\(index)")) }
            let readerToken = try await tenant.token(for: "b")
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { all, _ in
                try await StreamClients.withWebSocket(port: client.port, credential: readerToken) { readerDevice, _ in
                    try await tenant.read(in: "busy", by: "b")
                    let events = await all.take(2)
                    #expect(events.map { $0["type"] as? String } == ["receipt.read", "unread.changed"])
                    #expect((events.first?["messageIds"] as? [String]) == ids)
                    let own = await readerDevice.take(2)
                    #expect(own.last?["type"] as? String == "unread.changed")
                    #expect(own.last?["unreadCount"] as? Int == 0)
                    #expect(own.last?["userId"] as? String == "b")
                    // Nothing else followed: the next event is a new marker.
                    try await tenant.send(in: "busy", from: "a", text: "marker")
                    #expect((await all.next())?["type"] as? String == "message.created")
                }
            }
        }
    }

    @Test("WebSocket ?after= and SSE Last-Event-ID replay exactly the missed events, in order, once")
    func resume() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            var lastSeen = ""
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                try await tenant.send(in: "g", from: "a", text: "seen")
                lastSeen = try #require(await stream.next()?["id"] as? String)
            }
            var missed: [String] = []
            for index in 0..<5 { missed.append(try await tenant.send(in: "g", from: "a", text: "missed \(index)")) }

            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey, after: lastSeen) { stream, _ in
                let replayed = await stream.take(5)
                #expect(replayed.compactMap { ($0["messageIds"] as? [String])?.first } == missed)
                let marker = try await tenant.send(in: "g", from: "b", text: "after the replay")
                #expect((await stream.next())?["messageIds"] as? [String] == [marker])
            }
            try await StreamClients.withEventSource(port: client.port, credential: tenant.apiKey, lastEventID: lastSeen) { stream in
                let replayed = await stream.take(6)
                #expect(replayed.compactMap { ($0["messageIds"] as? [String])?.first }.prefix(5) == missed[...])
                #expect(replayed.allSatisfy { $0["sseId"] as? String == $0["id"] as? String })
            }
        }
    }

    @Test("an unknown or expired id answers resync.required with the current id, then the stream goes on")
    func resyncRequired() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            var ids: [String] = []
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                for _ in 0..<3 { try await tenant.send(in: "g", from: "a") }
                ids = await stream.take(3).compactMap { $0["id"] as? String }
            }
            try #require(ids.count == 3)
            // Retention deletes the first two, as it would after the retention period.
            try await TestDatabase.pool.execute(
                "UPDATE receipts.events SET occurred_at = now() - interval '2 days' WHERE tenant_id = $1 AND event_id <= $2::int8",
                [tenant.id, ids[1]])
            try await TestDatabase.pool.query("SELECT receipts.prune_events(interval '1 day')")

            var currentIds: [String] = []
            var sentAfterResync: [String] = []
            for after in [ids[0], "9223372036854775000", "not-a-number"] {
                try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey, after: after) { stream, _ in
                    let first = await stream.next()
                    #expect(first?["type"] as? String == "resync.required", "after=\(after)")
                    currentIds.append(first?["id"] as? String ?? "")
                    let id = try await tenant.send(in: "g", from: "b")
                    sentAfterResync.append(id)
                    #expect((await stream.next())?["messageIds"] as? [String] == [id])
                }
            }
            // The current id of a resync.required resumes: everything after it comes, once.
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey, after: currentIds[0]) { stream, _ in
                let replayed = await stream.take(3)
                #expect(replayed.compactMap { ($0["messageIds"] as? [String])?.first } == sentAfterResync)
            }
            // Still resumable from the newest deleted event, with nothing repeated.
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey, after: ids[1]) { stream, _ in
                let replayed = await stream.take(4)
                #expect(replayed.first?["id"] as? String == ids[2])
                #expect(replayed.dropFirst().compactMap { ($0["messageIds"] as? [String])?.first } == sentAfterResync)
            }
        }
    }

    @Test("an event that commits late comes before the later ids that committed first; none is skipped")
    func lateCommit() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("slow", members: ["a", "b"])
            try await tenant.createChat("fast", members: ["a", "b"])
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                var fast = ""
                var early: [String: Any]?
                try await TestDatabase.pool.withTransaction { connection in
                    // Takes an event id now and commits only at the end of this block.
                    try await connection.query("SELECT receipts.send_message($1, 'slow', 'late', 'a', 'x')", [tenant.id])
                    fast = try await tenant.send(in: "fast", from: "b")
                    // The later id has committed, but relaying it now could skip the earlier one.
                    early = await stream.next(within: .milliseconds(300))
                }
                let events = (early.map { [$0] } ?? []) + (await stream.take(early == nil ? 2 : 1))
                let ids = events.compactMap { $0["id"] as? String }
                try #require(ids.count == 2)
                if early == nil {
                    #expect(events.compactMap { ($0["messageIds"] as? [String])?.first } == ["late", fast])
                } else {
                    // The event ids are shared by every tenant: a hub of another test that waited
                    // its deadline at a gap of its own abandoned every missing id up to the newest
                    // it saw, this one's included (sql/functions/events.sql). Then the late event
                    // commits under a new id, after the other: still once, in id order.
                    #expect(events.compactMap { ($0["messageIds"] as? [String])?.first } == [fast, "late"])
                    #expect((Int64(ids[1]) ?? 0) > (Int64(ids[0]) ?? .max))
                }
                // Resuming after the first replays the second, once.
                try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey, after: ids[0]) { resumed, _ in
                    #expect((await resumed.next())?["id"] as? String == ids[1])
                    let marker = try await tenant.send(in: "fast", from: "a")
                    #expect((await resumed.next())?["messageIds"] as? [String] == [marker])
                }
            }
        }
    }

    @Test("8 writers on 8 chats, 15 reads each: the tenant stream gets every read exactly once, per chat in order")
    func concurrentWriters() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            var messages: [String: [String]] = [:]
            for chat in (0..<8).map({ "chat\($0)" }) {
                try await tenant.createChat(chat, kind: "direct", members: ["sender-\(chat)", "reader-\(chat)"])
                var ids: [String] = []
                for index in 0..<15 { ids.append(try await tenant.send(in: chat, from: "sender-\(chat)", text: "\(index)")) }
                messages[chat] = ids
            }
            let expected = messages
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (chat, ids) in expected {
                        group.addTask {
                            for id in ids { try await tenant.read(in: chat, by: "reader-\(chat)", ["messageIds": [id]]) }
                        }
                    }
                    try await group.waitForAll()
                }
                var reads: [String: [String]] = [:]
                var eventIds: [Int] = []
                while reads.values.reduce(0, { $0 + $1.count }) < 120, let event = await stream.next() {
                    eventIds.append(Int(event["id"] as? String ?? "") ?? -1)
                    guard event["type"] as? String == "receipt.read", let chat = event["chatId"] as? String else { continue }
                    reads[chat, default: []].append(contentsOf: event["messageIds"] as? [String] ?? [])
                }
                #expect(reads == expected)
                #expect(eventIds == eventIds.sorted())
                #expect(Set(eventIds).count == eventIds.count)
            }
        }
    }

    @Test("the listener's connection killed mid-stream: nothing is lost")
    func listenerKilled() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                let first = try await tenant.send(in: "g", from: "a", text: "before")
                #expect((await stream.next())?["messageIds"] as? [String] == [first])
                let killed = try await TestDatabase.pool.query(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
                    ["\(client.instanceName)-listener"]
                ).scalar(Int.self)
                #expect(killed == 1)
                var sent: [String] = []
                for index in 0..<5 { sent.append(try await tenant.send(in: "g", from: "a", text: "during \(index)")) }
                let received = await stream.take(5)
                #expect(received.compactMap { ($0["messageIds"] as? [String])?.first } == sent)
            }
        }
    }

    @Test("a delivery acknowledged over the WebSocket marks delivery as the token's user")
    func acknowledgeDelivery() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("dm", kind: "direct", members: ["alice", "bob"])
            try await tenant.createChat("not-bobs", kind: "direct", members: ["alice", "carol"])
            let id = try await tenant.send(in: "dm", from: "alice")
            let other = try await tenant.send(in: "not-bobs", from: "alice")
            let bobToken = try await tenant.token(for: "bob")
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { all, _ in
                try await StreamClients.withWebSocket(port: client.port, credential: bobToken, useQueryToken: true) { _, send in
                    try await send(#"{"type":"delivered","chatId":"not-bobs","messageIds":["\#(other)"]}"#)
                    try await send(#"{"type":"delivered","chatId":"dm","messageIds":["\#(id)"]}"#)
                    let event = await all.next()
                    #expect(event?["type"] as? String == "receipt.delivered")
                    #expect(event?["userId"] as? String == "bob")
                    #expect(event?["messageIds"] as? [String] == [id])
                }
            }
            #expect(try await tenant.message(id, in: "dm", viewer: "alice").deliveredTo == ["bob"])
            #expect(try await tenant.message(other, in: "not-bobs", viewer: "alice").deliveredTo == [])
        }
    }

    @Test("two replicas on one database relay each other's writes")
    func replicas() async throws {
        try await TestService.run { replicaA in
            try await TestService.run { replicaB in
                let tenant = try await replicaA.createTenant()
                try await tenant.createChat("g", members: ["a", "b"])
                let token = try await tenant.token(for: "a")
                try await StreamClients.withWebSocket(port: replicaB.port, credential: token) { stream, _ in
                    let id = try await tenant.send(in: "g", from: "a")
                    try await tenant.read(in: "g", by: "b")
                    let events = await stream.take(2)
                    #expect(events.map { $0["type"] as? String } == ["message.created", "receipt.read"])
                    #expect(events.last?["messageIds"] as? [String] == [id])
                }
            }
        }
    }

    @Test("the service's writes send no NOTIFY from their own transactions; the instance wakes the others with its own, only while it hears another instance")
    func notifiesForItsWrites() async throws {
        // A database of its own: NOTIFY reaches only the listeners of the same database, so
        // no other test's instance is heard here.
        try await TestDatabase.withFreshDatabase { url in
            // No periodic announcement during the test: each notification counted below is
            // the one on connecting, the answer to the peer, or one after writes.
            let configure: (inout ReceiptsConfiguration) -> Void = {
                $0.databaseURL = url
                $0.peerAnnouncementInterval = .seconds(600)
            }
            try await TestService.run(configure: configure) { client in
                let configuration = PostgresConfiguration(connectionString: url, applicationName: "receipts-tests")
                let listener = PostgresListener(configuration: configuration, logger: TestDatabase.logger)
                let notifications = listener.subscribe(to: "receipts_events")
                let received = NIOLockedValueBox<[PostgresNotification]>([])
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await listener.run() }
                    group.addTask {
                        for await event in notifications {
                            if case .notification(let notification) = event { received.withLockedValue { $0.append(notification) } }
                        }
                    }
                    while !listener.isListening { try await Task.sleep(for: .milliseconds(10)) }
                    let tenant = try await client.createTenant()
                    try await tenant.createChat("g", members: ["a", "b"])
                    func writeThreeTimes() async throws {
                        for _ in 0..<3 {
                            let id = try await tenant.send(in: "g", from: "a")
                            try await tenant.read(in: "g", by: "b", ["messageIds": [id]])
                        }
                    }
                    let database = PostgresConnectionPool(configuration: configuration, logger: TestDatabase.logger)
                    let instance = Set(try await database.query(
                        "SELECT pid FROM pg_stat_activity WHERE application_name = $1", [client.instanceName]
                    ).map { try $0.decode(Int32.self, column: 0) })
                    func fromInstance() -> [PostgresNotification] {
                        received.withLockedValue { $0.filter { instance.contains($0.backendPID) } }
                    }

                    // Alone: its writes wake nobody (the announcement on connecting may come late; one at most).
                    try await writeThreeTimes()
                    try await Task.sleep(for: .milliseconds(300))
                    #expect(fromInstance().count <= 1, "\(fromInstance())")
                    let alone = fromInstance().count

                    // Another instance announces itself: this one answers, and wakes it after its writes.
                    try await database.query("SELECT pg_notify('receipts_events', 'instance-test-peer')", [])
                    let deadline = ContinuousClock.now + .seconds(10)
                    while fromInstance().count == alone, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
                    let answered = fromInstance().count
                    #expect(answered > alone)  // the answer to the peer's announcement
                    try await writeThreeTimes()
                    while fromInstance().count == answered, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
                    try await Task.sleep(for: .milliseconds(200))  // a trigger's NOTIFY would have come by now
                    let notifications = fromInstance()
                    #expect(notifications.count > answered)
                    #expect(notifications.allSatisfy { $0.payload.hasPrefix("instance-") }, "\(notifications)")
                    #expect(notifications.count - answered <= 6)  // at most one per write, fewer when they coalesce
                    await database.close()
                    group.cancelAll()
                }
            }
        }
    }

    @Test("streams need a credential; a user token works as ?token=")
    func streamAuthentication() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let missing = try await client.request(.get, "/v1/events", as: nil)
            #expect(missing.status == .unauthorized)
            let wrong = try await client.request(.get, "/v1/events?token=nope", as: nil)
            #expect(wrong.status == .unauthorized)
            try await tenant.createChat("g", members: ["a", "b"])
            let token = try await tenant.token(for: "a")
            try await StreamClients.withWebSocket(port: client.port, credential: token, useQueryToken: true) { stream, _ in
                let id = try await tenant.send(in: "g", from: "b")
                #expect((await stream.next())?["messageIds"] as? [String] == [id])
            }
        }
    }
}
