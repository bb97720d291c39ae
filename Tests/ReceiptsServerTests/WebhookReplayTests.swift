import Foundation
import HTTPTypes
import Postgres
import TestSupport
import Testing

/// docs/api.md, "Webhooks": `POST /v1/webhooks/{id}/replay {"after"}` sends every retained
/// event after that id again, in order, with the webhook's usual guarantees.
@Suite("Webhook replay")
struct WebhookReplayTests {
    @Test("a replay from the first of 200 delivered events sends the 199 after it again, in order, under new webhook-ids; then delivery goes on")
    func replayFromAnEvent() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await WebhookTests.withService { client in
            let tenant = try await client.createTenant()
            #expect(try await WebhookTests.putWebhook("backend", url: receiver.url, events: ["message.created"], tenant: tenant).status == .created)
            try await tenant.createChat("team", members: ["alice", "bob"])
            for index in 0..<200 { try await tenant.send(in: "team", from: "alice", text: "\(index)") }
            let delivered = await receiver.waitForEvents(200)
            try #require(delivered.count == 200)
            let before = receiver.requests.count
            let firstIds = Set(receiver.requests.compactMap { $0.headers["webhook-id"] })

            // As if the receiver had lost everything after the first event (its database restored).
            let replay = try await client.request(.post, "/v1/webhooks/backend/replay", as: tenant.apiKey, json: ["after": delivered[0]])
            #expect(replay.status == .accepted)
            #expect(replay.json["id"] as? String == "backend")
            let again = await receiver.wait { requests in requests.dropFirst(before).flatMap(\.eventIds).count >= 199 }
            let replayed = again.dropFirst(before)
            #expect(replayed.flatMap(\.eventIds).prefix(199) == delivered.dropFirst()[...])
            #expect(replayed.allSatisfy { $0.isSigned(with: WebhookTests.secret) })
            #expect(replayed.compactMap { $0.headers["webhook-id"] }.allSatisfy { !firstIds.contains($0) && $0.hasSuffix("_r1") })

            // Then new events as before.
            let next = try await tenant.send(in: "team", from: "bob", text: "after the replay")
            let requests = await receiver.wait { $0.contains { $0.events.contains { ($0["messageIds"] as? [String]) == [next] } } }
            #expect(requests.flatMap(\.events).last?["messageIds"] as? [String] == [next])
        }
    }

    @Test("replay answers 400 for an unknown id or another tenant's, 409 for one no longer retained, 404 for no webhook, 403 for a user token; none moves anything")
    func badReplays() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await WebhookTests.withService { client, databaseURL in
            let tenant = try await client.createTenant()
            let stranger = try await client.createTenant()
            #expect(try await WebhookTests.putWebhook("backend", url: receiver.url, tenant: tenant).status == .created)
            try await tenant.createChat("team", members: ["alice", "bob"])
            try await tenant.send(in: "team", from: "alice")
            let ours = try #require(await receiver.waitForEvents(1).first)
            // An event of the other tenant, seen on its own stream.
            var theirs = ""
            try await StreamClients.withWebSocket(port: client.port, credential: stranger.apiKey) { stream, _ in
                try await stranger.createChat("x", members: ["y"])
                try await stranger.send(in: "x", from: "y")
                theirs = try #require(await stream.next()?["id"] as? String)
            }
            let token = try await tenant.token(for: "alice")
            let cases: [(String, String?, [String: Any], HTTPResponse.Status)] = [
                ("/v1/webhooks/backend/replay", tenant.apiKey, ["after": "not-an-id"], .badRequest),
                ("/v1/webhooks/backend/replay", tenant.apiKey, ["after": theirs], .badRequest),
                ("/v1/webhooks/backend/replay", tenant.apiKey, [:], .badRequest),
                ("/v1/webhooks/backend/replay", tenant.apiKey, ["after": ours, "from": ours], .badRequest),
                ("/v1/webhooks/nope/replay", tenant.apiKey, ["after": ours], .notFound),
                ("/v1/webhooks/backend/replay", token, ["after": ours], .forbidden),
            ]
            for (path, credential, body, status) in cases {
                let answer = try await client.request(.post, path, as: credential, json: body)
                #expect(answer.status == status, "\(path) \(body)")
                #expect((answer.json["error"] as? [String: Any])?["code"] is String)
            }
            // Retention deletes it: 409.
            let connection = try await PostgresConnection.connect(to: PostgresConfiguration(connectionString: databaseURL), logger: TestDatabase.logger)
            _ = try await connection.query("SELECT receipts.prune_events(make_interval(secs => 0))")
            await connection.close()
            #expect(try await client.request(.post, "/v1/webhooks/backend/replay", as: tenant.apiKey, json: ["after": ours]).status == .conflict)
            // Nothing moved: no request but the first.
            #expect(receiver.requests.count == 1)
        }
    }
}
