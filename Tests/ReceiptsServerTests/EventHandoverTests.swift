import Foundation
import HTTPTypes
import Postgres
import ReceiptsServer
import TestSupport
import Testing

/// A batch of reads has the log read right behind it, and the hub relays what that read
/// found without reading the log itself (`CommittedEventsConsumer`), while it would be idle
/// anyway; anything that does not follow on from where it stands is read from the log as always.
@Suite("Events handed over by writes")
struct EventHandoverTests {
    @Test("one write at a time: the hub takes each read's events as handed over, and the stream gets every event once, in order")
    func quietWritesAreHandedOver() async throws {
        // A database of its own: other tests' writes would come between the ids.
        try await TestDatabase.withFreshDatabase { url in
            try await TestService.run(configure: { $0.databaseURL = url }) { client in
                let tenant = try await client.createTenant()
                try await tenant.createChat("dm", kind: "direct", members: ["alice", "bob"])
                let aliceToken = try await tenant.token(for: "alice")
                let before = try await Self.handovers(client)
                var ids: [Int] = []
                try await StreamClients.withWebSocket(port: client.port, credential: aliceToken) { alice, _ in
                    for round in 0..<20 {
                        let message = try await tenant.send(in: "dm", from: "alice", id: "m\(round)")
                        let created = await alice.next()
                        #expect(created?["type"] as? String == "message.created")
                        #expect(created?["messageIds"] as? [String] == [message])
                        try await tenant.read(in: "dm", by: "bob")
                        let read = await alice.next()
                        #expect(read?["type"] as? String == "receipt.read")
                        #expect(read?["messageIds"] as? [String] == [message])
                        ids += [created, read].compactMap { ($0?["id"] as? String).flatMap { Int($0) } }
                    }
                }
                #expect(ids.count == 40)
                #expect(ids == ids.sorted() && Set(ids).count == ids.count)
                let after = try await Self.handovers(client)
                // The reads (sends are not handed over) that came while the hub was idle: all
                // but a few at the start.
                #expect(after.taken - before.taken >= 15, "\(before) → \(after)")
            }
        }
    }

    @Test("writes of many chats at once, and a write from psql among them: every event reaches the tenant's stream once, in order")
    func busyWritesStayExact() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            for chat in 0..<6 { try await tenant.createChat("c\(chat)", members: ["a", "b"]) }
            try await tenant.createChat("p", members: ["a", "b"])
            let expected = 6 * 10 * 2
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for chat in 0..<6 {
                        group.addTask {
                            for round in 0..<10 {
                                _ = try await tenant.send(in: "c\(chat)", from: "a", id: "m\(round)")
                                try await tenant.read(in: "c\(chat)", by: "b")
                            }
                        }
                    }
                    group.addTask {
                        // A writer without the service's setting notifies from its trigger.
                        for round in 0..<5 {
                            try await TestDatabase.pool.query("SELECT receipts.send_message($1, 'p', $2, 'a', 'x')", [tenant.id, "p\(round)"])
                        }
                    }
                    try await group.waitForAll()
                }
                var seen: [Int] = []
                var perChat: [String: [String]] = [:]
                while seen.count < expected, let event = await stream.next() {
                    guard let type = event["type"] as? String, type == "message.created" || type == "receipt.read",
                        let chat = event["chatId"] as? String, chat.hasPrefix("c"), let id = (event["id"] as? String).flatMap({ Int($0) })
                    else { continue }
                    seen.append(id)
                    perChat[chat, default: []].append(type)
                }
                #expect(seen.count == expected)
                #expect(seen == seen.sorted() && Set(seen).count == seen.count)
                for (chat, types) in perChat {
                    #expect(types == Array(repeating: ["message.created", "receipt.read"], count: 10).flatMap { $0 }, "\(chat)")
                }
            }
        }
    }

    /// The hub's handover counters, from `/metrics`.
    static func handovers(_ client: APIClient) async throws -> (taken: Int, read: Int) {
        let metrics = try await client.request(.get, "/metrics", as: nil).body
        func value(_ outcome: String) -> Int {
            let prefix = #"receipts_live_event_handovers_total{outcome="\#(outcome)"} "#
            return metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
        }
        return (value("taken"), value("read"))
    }
}
