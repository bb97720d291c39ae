import Foundation
import HTTPTypes
import Postgres
import ReceiptsServer
import TestSupport
import Testing

/// Webhooks end to end: the real service on a database of its own (every instance delivers
/// every webhook of its database, so tests must not share one), a real receiver on loopback.
@Suite("Webhooks")
struct WebhookTests {
    static let secret = "a-secret-of-32-characters-------"

    /// Runs `body` against a service on a fresh database whose webhooks may reach loopback,
    /// retrying from `retryBase`, each attempt given `attemptTimeout`.
    static func withService(
        allowsPrivateNetworks: Bool = true, retryBase: Duration = .milliseconds(100), attemptTimeout: Duration = .seconds(10),
        _ body: @Sendable (APIClient) async throws -> Void
    ) async throws {
        try await Self.withService(
            allowsPrivateNetworks: allowsPrivateNetworks, retryBase: retryBase, attemptTimeout: attemptTimeout
        ) { client, _ in
            try await body(client)
        }
    }

    /// As above, `body` also getting the database's URL.
    static func withService(
        allowsPrivateNetworks: Bool = true, retryBase: Duration = .milliseconds(100), attemptTimeout: Duration = .seconds(10),
        _ body: @Sendable (APIClient, _ databaseURL: String) async throws -> Void
    ) async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestService.run(configure: { configuration in
                configuration.databaseURL = url
                configuration.webhooks.allowsPrivateNetworks = allowsPrivateNetworks
                configuration.webhooks.retryBase = retryBase
                configuration.webhooks.attemptTimeout = attemptTimeout
            }) { client in
                try await body(client, url)
            }
        }
    }

    static func putWebhook(
        _ id: String, url: String, events: [String]? = nil, secret: String? = WebhookTests.secret, tenant: TestTenant
    ) async throws -> APIResponse {
        var body: [String: Any] = ["url": url]
        if let events { body["events"] = events }
        if let secret { body["secret"] = secret }
        return try await tenant.client.request(.put, "/v1/webhooks/\(id)", as: tenant.apiKey, json: body)
    }

    @Test("every delivery is signed (t=…,v1=…) with the webhook's secret and carries the stream's events; GET shows where delivery stands")
    func signedDeliveries() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await Self.withService { client in
            let tenant = try await client.createTenant()
            let created = try await Self.putWebhook("backend", url: receiver.url, tenant: tenant)
            #expect(created.status == .created)
            #expect(created.json["id"] as? String == "backend")
            #expect(created.json["url"] as? String == receiver.url)
            #expect(created.json["events"] as? [String] == ["message.created", "receipt.delivered", "receipt.read", "unread.changed"])
            #expect(created.json["secret"] as? String == Self.secret)
            #expect(created.json["createdAt"] is String)

            try await tenant.createChat("team", members: ["alice", "bob"])
            let message = try await tenant.send(in: "team", from: "alice")
            try await tenant.read(in: "team", by: "bob")
            // message.created, receipt.read, unread.changed (bob's count).
            let ids = await receiver.waitForEvents(3)
            #expect(ids.count == 3)
            let requests = receiver.requests
            for request in requests {
                #expect(request.isSigned(with: Self.secret))
                #expect(!request.isSigned(with: "another-secret-of-32-characters-"))
                #expect(request.headers["receipts-webhook-id"] == "backend")
                #expect(request.headers["content-type"] == "application/json")
                #expect(request.json["webhookId"] as? String == "backend")
            }
            let events = requests.flatMap(\.events)
            #expect(events.map { $0["type"] as? String } == ["message.created", "receipt.read", "unread.changed"])
            #expect(events[0]["messageIds"] as? [String] == [message])
            #expect(events[1]["userId"] as? String == "bob")

            // Acknowledged (recorded right after the receiver's answer): the position is the last
            // event's id, nothing pending.
            let delivery = await Self.delivery(of: "backend", tenant: tenant) { $0["lastEventId"] as? String == ids.last }
            let shown = try await client.request(.get, "/v1/webhooks/backend", as: tenant.apiKey)
            #expect(shown.status == .ok)
            #expect(shown.json["secret"] == nil)
            #expect(shown.json["delivery"] is [String: Any])
            #expect(delivery["lastEventId"] as? String == ids.last)
            #expect(delivery["pending"] as? Int == 0)
            #expect(delivery["failures"] as? Int == 0)
            #expect(delivery["lastError"] is NSNull)
            #expect(delivery["lastAttemptAt"] is String)
            #expect(delivery["nextAttemptAt"] is NSNull)
            let list = try await client.request(.get, "/v1/webhooks", as: tenant.apiKey)
            #expect((list.json["webhooks"] as? [[String: Any]])?.map { $0["id"] as? String } == ["backend"])
            let metrics = try await client.request(.get, "/metrics", as: nil).body
            #expect(metrics.contains(#"receipts_webhook_deliveries_total{outcome="delivered"}"#))
            #expect(metrics.contains(#"receipts_webhook_lag_events{webhook="\#(tenant.id)/backend"}"#))
            #expect(metrics.contains("receipts_webhooks_delivering 1"))

            // Another tenant sees no such webhook; a user token may not manage webhooks.
            let stranger = try await client.createTenant()
            #expect(try await client.request(.get, "/v1/webhooks/backend", as: stranger.apiKey).status == .notFound)
            #expect(try await client.request(.delete, "/v1/webhooks/backend", as: stranger.apiKey).status == .notFound)
            let token = try await tenant.token(for: "alice")
            #expect(try await client.request(.get, "/v1/webhooks", as: token).status == .forbidden)
        }
    }

    @Test("500 writes across chats reach the receiver in stream order, every event at least once, with the tenant stream's ids")
    func orderAndCompleteness() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await Self.withService { client in
            let tenant = try await client.createTenant()
            let chats = (0..<5).map { "chat\($0)" }
            for chat in chats { try await tenant.createChat(chat, members: ["alice", "bob"]) }
            #expect(try await Self.putWebhook("all", url: receiver.url, tenant: tenant).status == .created)
            try await StreamClients.withEventSource(port: client.port, credential: tenant.apiKey) { stream in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for chat in chats {
                        group.addTask {
                            for index in 0..<100 { try await tenant.send(in: chat, from: "alice", text: "m\(index)") }
                        }
                    }
                    try await group.waitForAll()
                }
                let streamed = await stream.take(500, within: .seconds(30))
                #expect(streamed.count == 500)
                let delivered = await receiver.waitForEvents(500, within: .seconds(30))
                #expect(delivered == streamed.compactMap { $0["id"] as? String })
                // The same bodies as the stream's.
                let bodies = Dictionary(receiver.requests.flatMap(\.events).map { ($0["id"] as! String, $0) }) { first, _ in first }
                for event in streamed.prefix(20) {
                    var expected = event
                    expected["sseId"] = nil
                    let id = try #require(event["id"] as? String)
                    #expect(NSDictionary(dictionary: bodies[id] ?? [:]).isEqual(to: expected))
                }
                // Batches of at most 100, each in order.
                for request in receiver.requests {
                    #expect((1...100).contains(request.events.count))
                    let numbers = request.eventIds.compactMap(Int64.init)
                    #expect(numbers == numbers.sorted())
                }
            }
        }
    }

    @Test("a batch answered 500 three times, then not at all, is sent again each time with growing backoff, and nothing after it goes out before a 200")
    func retriesInOrder() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        receiver.script([.status(500), .status(500), .status(500), .silence])
        try await Self.withService(retryBase: .milliseconds(200), attemptTimeout: .seconds(1)) { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("team", members: ["alice", "bob"])
            #expect(try await Self.putWebhook("flaky", url: receiver.url, tenant: tenant).status == .created)
            let first = try await tenant.send(in: "team", from: "alice", text: "first")
            await receiver.wait { $0.count >= 1 }
            // Written while the first batch is being retried.
            let second = try await tenant.send(in: "team", from: "alice", text: "second")

            let state = await Self.delivery(of: "flaky", tenant: tenant) { ($0["failures"] as? Int ?? 0) >= 1 }
            #expect((state["failures"] as? Int ?? 0) >= 1)
            #expect(state["lastError"] is String)
            #expect(state["pending"] as? Int ?? 0 >= 1)

            let requests = await receiver.wait(within: .seconds(20)) { requests in
                requests.contains { $0.events.contains { ($0["messageIds"] as? [String]) == [second] } }
            }
            try #require(requests.count >= 6, "requests: \(requests.count)")
            // The same batch five times (3 × 500, a timeout, the 200), the second message after.
            let firstBatch = requests[0].eventIds
            for request in requests.prefix(5) { #expect(request.eventIds == firstBatch) }
            #expect(requests[0].events.first?["messageIds"] as? [String] == [first])
            for request in requests.prefix(5) {
                #expect(!request.events.contains { ($0["messageIds"] as? [String]) == [second] })
            }
            // Backoff from 0.2 s doubling, each delay within ±20 %: 0.2, 0.4, 0.8 s between the
            // 500s; the timeout (1 s), then 1.6 s before the fifth attempt. Each gap is at least
            // its delay's lower bound, which doubles (a busy machine only adds to a gap).
            let gaps = (1..<5).map { requests[$0].receivedAt - requests[$0 - 1].receivedAt }
            #expect(gaps[0] >= .milliseconds(160))
            #expect(gaps[1] >= .milliseconds(320))
            #expect(gaps[2] >= .milliseconds(640))
            #expect(gaps[3] >= .milliseconds(1000 + 1280))
            #expect(gaps[2] > gaps[0])

            let recovered = await Self.delivery(of: "flaky", tenant: tenant) { ($0["failures"] as? Int) == 0 && ($0["pending"] as? Int) == 0 }
            #expect(recovered["lastError"] is NSNull)
        }
    }

    @Test("when retention deleted the batch a receiver kept refusing, the next batch starts with resync.required, then delivery goes on")
    func resyncAfterRetention() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        receiver.script(Array(repeating: .status(500), count: 4))
        try await Self.withService { client, url in
            let tenant = try await client.createTenant()
            try await tenant.createChat("team", members: ["alice", "bob"])
            #expect(try await Self.putWebhook("hook", url: receiver.url, tenant: tenant).status == .created)
            let lost = try await tenant.send(in: "team", from: "alice", text: "refused, then pruned")
            await receiver.wait { $0.count >= 1 }
            // Retention runs (as EventRetentionService does, with a retention of 0 s).
            let connection = try await PostgresConnection.connect(to: PostgresConfiguration(connectionString: url), logger: TestDatabase.logger)
            _ = try await connection.query("SELECT receipts.prune_events(make_interval(secs => 0))")
            await connection.close()

            let requests = await receiver.wait { $0.dropFirst(4).contains { $0.events.first?["type"] as? String == "resync.required" } }
            let resync = try #require(requests.dropFirst(4).first, "requests: \(requests.count)")
            #expect(resync.events.map { $0["type"] as? String } == ["resync.required"])
            #expect(resync.isSigned(with: Self.secret))
            // Delivery goes on after it.
            let next = try await tenant.send(in: "team", from: "alice", text: "after")
            let after = await receiver.wait { $0.contains { $0.events.contains { ($0["messageIds"] as? [String]) == [next] } } }
            #expect(!after.dropFirst(4).contains { $0.events.contains { ($0["messageIds"] as? [String]) == [lost] } })
            let delivery = await Self.delivery(of: "hook", tenant: tenant) { ($0["pending"] as? Int) == 0 && ($0["failures"] as? Int) == 0 }
            #expect(delivery["lastError"] is NSNull)
        }
    }

    @Test("DELETE stops deliveries; PUT keeps the position and signs the next attempt with a new secret; the events filter holds")
    func deleteReplaceAndFilter() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await Self.withService { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("team", members: ["alice", "bob"])
            let created = try await Self.putWebhook("hook", url: receiver.url, events: ["message.created"], tenant: tenant)
            #expect(created.status == .created)
            let first = try await tenant.send(in: "team", from: "alice")
            try await tenant.read(in: "team", by: "bob")
            let second = try await tenant.send(in: "team", from: "alice")
            await receiver.waitForEvents(2)
            try await Task.sleep(for: .milliseconds(300))
            // The filter: message.created only, not the read nor bob's unread count.
            #expect(receiver.requests.flatMap(\.events).map { $0["messageIds"] as? [String] } == [[first], [second]])
            #expect(receiver.requests.flatMap(\.events).allSatisfy { $0["type"] as? String == "message.created" })

            // A new secret (and filter), same position: the next delivery is signed with it.
            let newSecret = "the-new-secret-of-32-characters-"
            let replaced = try await Self.putWebhook("hook", url: receiver.url, events: ["receipt.read"], secret: newSecret, tenant: tenant)
            #expect(replaced.status == .ok)
            #expect(replaced.json["createdAt"] as? String == created.json["createdAt"] as? String)
            #expect(replaced.json["events"] as? [String] == ["receipt.read"])
            let before = receiver.requests.count
            try await tenant.send(in: "team", from: "alice")
            try await tenant.read(in: "team", by: "bob")
            let after = await receiver.wait { $0.count > before }
            let next = try #require(after.dropFirst(before).first)
            #expect(next.isSigned(with: newSecret))
            #expect(!next.isSigned(with: Self.secret))
            #expect(next.events.map { $0["type"] as? String } == ["receipt.read"])

            // Without a secret, one is generated in the Standard Webhooks form: whsec_ and 32 random bytes.
            let generated = try await Self.putWebhook("other", url: receiver.url, secret: nil, tenant: tenant)
            let secret = try #require(generated.json["secret"] as? String)
            #expect(secret.hasPrefix("whsec_"))
            #expect(Data(base64Encoded: String(secret.dropFirst(6)))?.count == 32)
            #expect(try await client.request(.delete, "/v1/webhooks/other", as: tenant.apiKey).status == .noContent)

            // DELETE: nothing more is sent.
            let deleted = try await client.request(.delete, "/v1/webhooks/hook", as: tenant.apiKey)
            #expect(deleted.status == .noContent)
            #expect(try await client.request(.delete, "/v1/webhooks/hook", as: tenant.apiKey).status == .notFound)
            #expect(try await client.request(.get, "/v1/webhooks/hook", as: tenant.apiKey).status == .notFound)
            let count = receiver.requests.count
            try await tenant.send(in: "team", from: "alice")
            try await tenant.read(in: "team", by: "bob")
            try await Task.sleep(for: .seconds(1))
            #expect(receiver.requests.count == count)
        }
    }

    @Test("bad webhook requests are 400 and create nothing; a literal private address is 400 without the opt-in")
    func badRequestsAndPrivateAddresses() async throws {
        try await Self.withService(allowsPrivateNetworks: false) { client in
            let tenant = try await client.createTenant()
            for url in [
                "http://127.0.0.1:8080/hook", "http://10.1.2.3/hook", "http://[::1]/hook", "http://169.254.169.254/latest",
                "http://192.168.0.10/", "http://0.0.0.0/", "http://224.0.0.1/", "http://[fe80::1]/", "http://[::ffff:127.0.0.1]/",
            ] {
                let answer = try await Self.putWebhook("hook", url: url, tenant: tenant)
                #expect(answer.status == .badRequest, "\(url)")
                #expect(answer.errorCode == "invalid_request")
            }
            let longURL = "https://example.com/" + String(repeating: "a", count: 2048)
            for url in ["ftp://example.com/", "example.com/hook", "http:///path", longURL] {
                #expect(try await Self.putWebhook("hook", url: url, tenant: tenant).status == .badRequest, "\(url)")
            }
            let url = "https://hooks.example.com/receipts"
            #expect(try await Self.putWebhook("hook", url: url, events: [], tenant: tenant).status == .badRequest)
            #expect(try await Self.putWebhook("hook", url: url, events: ["message.sent"], tenant: tenant).status == .badRequest)
            #expect(try await Self.putWebhook("hook", url: url, events: ["receipt.read", "receipt.read"], tenant: tenant).status == .badRequest)
            #expect(try await Self.putWebhook("hook", url: url, secret: "too-short", tenant: tenant).status == .badRequest)
            #expect(try await Self.putWebhook("hook", url: url, secret: String(repeating: "s", count: 129), tenant: tenant).status == .badRequest)
            #expect(try await Self.putWebhook("bad%20id", url: url, tenant: tenant).status == .badRequest)
            for body in [#"{"url":null}"#, #"{"url":"https://a.example/","events":null}"#, #"{"url":"https://a.example/","extra":1}"#, "{}"] {
                let answer = try await client.request(.put, "/v1/webhooks/hook", as: tenant.apiKey, body: body)
                #expect(answer.status == .badRequest, "\(body)")
            }
            let list = try await client.request(.get, "/v1/webhooks", as: tenant.apiKey)
            #expect((list.json["webhooks"] as? [Any])?.isEmpty == true)
            // A public host is fine; an 11th webhook is 409.
            for index in 0..<10 {
                #expect(try await Self.putWebhook("hook\(index)", url: url, tenant: tenant).status == .created)
            }
            #expect(try await Self.putWebhook("hook10", url: url, tenant: tenant).status == .conflict)
            #expect(try await Self.putWebhook("hook9", url: url + "/v2", tenant: tenant).status == .ok)
        }
    }

    @Test("a host name that resolves to loopback is refused at delivery (the check is on the address connected to)")
    func resolvedPrivateAddressRefused() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await Self.withService(allowsPrivateNetworks: false) { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("team", members: ["alice", "bob"])
            let url = receiver.url.replacingOccurrences(of: "127.0.0.1", with: "localhost")
            #expect(try await Self.putWebhook("hook", url: url, tenant: tenant).status == .created)
            try await tenant.send(in: "team", from: "alice")
            let delivery = await Self.delivery(of: "hook", tenant: tenant) { ($0["failures"] as? Int ?? 0) >= 1 }
            #expect((delivery["lastError"] as? String)?.contains("may not reach") == true)
            #expect(receiver.requests.isEmpty)
        }
    }

    /// The webhook's `delivery` once `condition` holds for it (or after 15 s).
    static func delivery(
        of webhook: String, tenant: TestTenant, until condition: ([String: Any]) -> Bool
    ) async -> [String: Any] {
        let deadline = ContinuousClock.now + .seconds(15)
        var delivery: [String: Any] = [:]
        while ContinuousClock.now < deadline {
            if let answer = try? await tenant.client.request(.get, "/v1/webhooks/\(webhook)", as: tenant.apiKey),
                let shown = answer.json["delivery"] as? [String: Any]
            {
                delivery = shown
                if condition(shown) { return shown }
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return delivery
    }
}
