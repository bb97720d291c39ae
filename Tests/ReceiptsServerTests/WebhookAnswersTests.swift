import Foundation
import HTTPTypes
import Postgres
import TestSupport
import Testing

/// docs/api.md, "Webhooks": what a receiver's answer asks for. A 429 or 503 with
/// `Retry-After` is tried again after it, not after the backoff; 410 Gone disables the webhook
/// until a `PUT` enables it again, at its position.
@Suite("Webhook answers")
struct WebhookAnswersTests {
    @Test("503 with Retry-After: 1 is tried again a second later, though the backoff would retry after 100 ms")
    func retryAfter() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        receiver.script([.retryAfter(503, "1")])
        try await WebhookTests.withService(retryBase: .milliseconds(100)) { client in
            let tenant = try await client.createTenant()
            #expect(try await WebhookTests.putWebhook("busy", url: receiver.url, tenant: tenant).status == .created)
            try await tenant.createChat("team", members: ["alice", "bob"])
            try await tenant.send(in: "team", from: "alice")
            let requests = await receiver.wait { $0.count >= 2 }
            try #require(requests.count >= 2)
            // The timing is the point: the second attempt waited for the receiver's second.
            #expect(requests[1].receivedAt - requests[0].receivedAt >= .milliseconds(950))
            #expect(requests[1].eventIds == requests[0].eventIds)
            let shown = try await client.request(.get, "/v1/webhooks/busy", as: tenant.apiKey)
            #expect(shown.json["disabled"] as? Bool == false)
        }
    }

    @Test("410 Gone disables the webhook: GET says so and why, nothing more is sent; PUT enables it and delivery goes on from its position")
    func gone() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        receiver.script([.status(410)])
        try await WebhookTests.withService { client in
            let tenant = try await client.createTenant()
            #expect(try await WebhookTests.putWebhook("gone", url: receiver.url, tenant: tenant).status == .created)
            try await tenant.createChat("team", members: ["alice", "bob"])
            let first = try await tenant.send(in: "team", from: "alice", text: "refused with 410")
            await receiver.wait { $0.count >= 1 }
            var shown: [String: Any] = [:]
            for _ in 0..<200 {
                shown = try await client.request(.get, "/v1/webhooks/gone", as: tenant.apiKey).json
                if shown["disabled"] as? Bool == true { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(shown["disabled"] as? Bool == true)
            let delivery = shown["delivery"] as? [String: Any]
            #expect((delivery?["lastError"] as? String)?.contains("410") == true)
            // Disabled: a new event is not sent (the backoff in these tests is 100 ms).
            let second = try await tenant.send(in: "team", from: "alice", text: "while disabled")
            try await Task.sleep(for: .milliseconds(500))
            #expect(receiver.requests.count == 1)

            // PUT enables it again: the refused batch and what came since, in order.
            #expect(try await WebhookTests.putWebhook("gone", url: receiver.url, tenant: tenant).status == .ok)
            let requests = await receiver.wait { requests in
                requests.dropFirst().flatMap(\.events).contains { ($0["messageIds"] as? [String]) == [second] }
            }
            let created = requests.dropFirst().flatMap(\.events).filter { $0["type"] as? String == "message.created" }
            #expect(created.compactMap { ($0["messageIds"] as? [String])?.first } == [first, second])
            let enabled = try await client.request(.get, "/v1/webhooks/gone", as: tenant.apiKey).json
            #expect(enabled["disabled"] as? Bool == false)
        }
    }

    @Test("the attempt log: each attempt newest first with its batch, status, time and error; limit 1–100; the newest 100 kept; unknown webhook 404")
    func attempts() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        receiver.script([.status(500)])
        try await WebhookTests.withService { client, databaseURL in
            let tenant = try await client.createTenant()
            #expect(try await WebhookTests.putWebhook("logged", url: receiver.url, tenant: tenant).status == .created)
            try await tenant.createChat("team", members: ["alice", "bob"])
            try await tenant.send(in: "team", from: "alice")
            let requests = await receiver.wait { $0.count >= 2 }
            let eventId = try #require(requests.first?.eventIds.first)
            var attempts: [[String: Any]] = []
            for _ in 0..<200 {
                attempts = try await client.request(.get, "/v1/webhooks/logged/attempts", as: tenant.apiKey).json["attempts"] as? [[String: Any]] ?? []
                if attempts.count >= 2 { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            try #require(attempts.count == 2)
            // Newest first: the acknowledged one, then the refused one, of the same batch.
            #expect(attempts.map { $0["status"] as? Int } == [200, 500])
            #expect(attempts[0]["error"] is NSNull)
            #expect((attempts[1]["error"] as? String)?.contains("500") == true)
            for attempt in attempts {
                #expect(attempt["webhookMessageId"] as? String == requests[0].headers["webhook-id"])
                #expect(attempt["firstEventId"] as? String == eventId && attempt["lastEventId"] as? String == eventId)
                #expect(attempt["events"] as? Int == 1 && (attempt["durationMs"] as? Int ?? -1) >= 0 && attempt["attemptedAt"] is String)
            }
            let answer = try await client.request(.get, "/v1/webhooks/logged/attempts?limit=1", as: tenant.apiKey)
            #expect((answer.json["attempts"] as? [Any])?.count == 1)
            for bad in ["0", "101", "x"] {
                #expect(try await client.request(.get, "/v1/webhooks/logged/attempts?limit=\(bad)", as: tenant.apiKey).status == .badRequest)
            }
            #expect(try await client.request(.get, "/v1/webhooks/nope/attempts", as: tenant.apiKey).status == .notFound)
            #expect(try await client.request(.get, "/v1/webhooks/logged/attempts", as: try await tenant.token(for: "alice")).status == .forbidden)

            // Bounded: 120 more attempts leave the newest 100.
            let connection = try await PostgresConnection.connect(to: PostgresConfiguration(connectionString: databaseURL), logger: TestDatabase.logger)
            _ = try await connection.query(
                """
                SELECT receipts.record_webhook_attempt($1, 'logged', 'm' || g, '1', '1', 1, 200, 1, NULL) FROM generate_series(1, 120) AS g
                """, [tenant.id])
            let kept = try await connection.query(
                "SELECT count(*)::int FROM receipts.webhook_attempts WHERE tenant_id = $1", [tenant.id])
            await connection.close()
            #expect(try kept.scalar(Int.self) == 100)
        }
    }
}
