import Foundation
import HTTPTypes
import ReceiptsServer
import TestSupport
import Testing

/// The alert rules and the dashboard of deploy/ against the service itself: a real Prometheus
/// (`LocalPrometheus`) scraping a running instance sees an alert go pending, fire and resolve,
/// and every metric the rules and the dashboard name is in a live `/metrics`. One Prometheus
/// at a time: the machine running the suite has few cores.
@Suite("Alert rules on a real Prometheus", .serialized)
struct PrometheusAlertTests {
    static let deliveriesFailing = "ReceiptsWebhookDeliveriesFailing"

    @Test("a webhook receiver that stops: ReceiptsWebhookDeliveriesFailing stays silent while it answers, goes pending, fires, and resolves once it is back")
    func webhookReceiverDown() async throws {
        let receiver = try await WebhookReceiver.start()
        // A stopped receiver refuses connections; the HTTP client tries to connect until the
        // attempt's deadline, so each attempt fails as a timeout, after 2 s here.
        try await WebhookTests.withService(retryBase: .milliseconds(200), attemptTimeout: .seconds(2)) { client, _ in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let created = try await WebhookTests.putWebhook("backend", url: receiver.url, tenant: tenant)
            try #require(created.status == .created, "\(created.body)")

            try await LocalPrometheus.with(scraping: client.port) { prometheus in
                // Healthy: two messages delivered, and Prometheus has seen them.
                for _ in 0..<2 { _ = try await tenant.send(in: "g", from: "a") }
                #expect(await receiver.wait { $0.flatMap(\.eventIds).count >= 2 }.flatMap(\.eventIds).count >= 2)
                try await Self.waitFor("the delivered attempts to be scraped", within: .seconds(30)) {
                    (try await prometheus.value(of: #"sum(receipts_webhook_deliveries_total{job="receipts",outcome="delivered"})"#) ?? 0) >= 1
                }
                #expect(try await prometheus.value(of: #"up{job="receipts"}"#) == 1)
                // A few evaluations later still nothing about webhooks, or the instance.
                try await Task.sleep(for: .seconds(4))
                let healthy = try await prometheus.alerts()
                #expect(!healthy.contains { $0.name == Self.deliveriesFailing }, "\(healthy)")
                #expect(!healthy.contains { $0.name == "ReceiptsInstanceDown" }, "\(healthy)")

                // The receiver stops: every attempt fails (connection refused), backing off.
                await receiver.stop()
                _ = try await tenant.send(in: "g", from: "a")
                var states: [String] = []
                // Generous deadlines: in the full suite the machine is loaded, and attempts back off.
                let firing = try await prometheus.waitForAlert(Self.deliveriesFailing, within: .seconds(150)) { alerts in
                    if let state = alerts.first?.state, states.last != state { states.append(state) }
                    return alerts.first?.state == "firing"
                }
                #expect(states == ["pending", "firing"])
                #expect(firing.first?.labels["severity"] == "ticket")

                // Back on the same address, with events coming: it resolves.
                let back = try await WebhookReceiver.start(port: receiver.port)
                defer { Task { await back.stop() } }
                let traffic = Task {
                    while !Task.isCancelled {
                        _ = try? await tenant.send(in: "g", from: "a")
                        try? await Task.sleep(for: .milliseconds(300))
                    }
                }
                defer { traffic.cancel() }
                try await prometheus.waitForAlert(Self.deliveriesFailing, within: .seconds(180)) { $0.isEmpty }
                #expect(!back.requests.isEmpty)
            }
        }
    }

    @Test("every metric the rules and the dashboard name is in a live /metrics (scripts/observability/check.sh --metrics)")
    func liveMetricsCoverRulesAndDashboard() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await TestDatabase.withFreshDatabase { url in
            try await TestService.run(configure: { configuration in
                configuration.databaseURL = url
                configuration.webhooks.allowsPrivateNetworks = true
                // The primary itself as the only "standby": it serves no reads (it is not in
                // recovery), but its lag and usable gauges are exported, as with standbys.
                configuration.replicas.databaseURL = url
            }) { client in
                let tenant = try await client.createTenant()
                try await tenant.createChat("g", members: ["a", "b"])
                let created = try await WebhookTests.putWebhook("backend", url: receiver.url, tenant: tenant)
                try #require(created.status == .created, "\(created.body)")
                let id = try await tenant.send(in: "g", from: "a")
                try await tenant.read(in: "g", by: "b", ["messageIds": [id]])
                _ = try await client.request(.get, "/v1/users/b/unread", as: tenant.apiKey)
                _ = await receiver.waitForEvents(3)
                // The webhook's lag is read at most once a second while it is delivered.
                var text = ""
                try await Self.waitFor("the webhook's lag and the standby's gauges in /metrics", within: .seconds(20)) {
                    text = try await client.request(.get, "/metrics", as: nil).body
                    return text.contains("receipts_webhook_lag_events{") && text.contains("receipts_replica_usable{")
                }
                let file = FileManager.default.temporaryDirectory.appendingPathComponent("receipts-metrics-\(UUID().uuidString).txt")
                try text.write(to: file, atomically: true, encoding: .utf8)
                defer { try? FileManager.default.removeItem(at: file) }
                let check = try await TestDatabase.run("scripts/observability/check.sh", arguments: ["--metrics", file.path], allowFailure: true)
                #expect(check.status == 0, "\(check.output)\(check.errorOutput)")
            }
        }
    }

    static func waitFor(_ what: String, within limit: Duration, until condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw LocalPrometheus.Failure(description: "waited \(limit) for \(what)") }
            try await Task.sleep(for: .milliseconds(250))
        }
    }
}
