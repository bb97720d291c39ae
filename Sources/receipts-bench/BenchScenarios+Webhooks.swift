import Foundation
import NIOHTTP1

extension BenchScenarios {
    // MARK: - Webhooks

    /// Webhooks (docs/api.md, "Webhooks"): how soon a read reaches an idle receiver on loopback, and what
    /// one webhook costs the write path: single mark-reads as fast as `concurrency` clients go,
    /// without and then with a webhook taking every event, and a paced 2,000 reads/s with it,
    /// watching the webhook's lag (`delivery.pending` of `GET /v1/webhooks/{id}`).
    /// The service must allow loopback receivers (`RECEIPTS_WEBHOOK_ALLOW_PRIVATE_NETWORKS`,
    /// which the bench sets on the service it starts).
    func webhooks(into results: inout BenchResults) async throws {
        let receiver = try await BenchWebhookReceiver.start()
        do {
            try await self.readToWebhook(receiver: receiver, into: &results)
            receiver.stopTrackingReads()
            try await self.writePathWithWebhook(receiver: receiver, into: &results)
        } catch {
            await receiver.stop()
            throw error
        }
        await receiver.stop()
    }

    /// Read → receiver: from sending a single mark-read to the receiver having its
    /// `receipt.read`, one at a time, the receiver idle in between.
    private func readToWebhook(receiver: BenchWebhookReceiver, into results: inout BenchResults) async throws {
        let key = self.tenant.apiKey
        let samples = self.count(300, minimum: 20)
        try await self.client.expect(201, .PUT, "/v1/chats/webhook-latency", as: key, body: ["kind": "direct", "members": ["ws", "wr"]])
        try await self.insertMessages(chat: "webhook-latency", sender: "ws", count: samples + 10)
        try await self.settleDatabase()
        try await self.client.expect(
            201, .PUT, "/v1/webhooks/latency", as: key, body: ["url": receiver.url, "events": ["receipt.read"]])
        var latencies: [Double] = []
        for sample in 1...samples {
            let message = "webhook-latency-\(sample)"
            let start = ContinuousClock.now
            try await self.client.check(200, .POST, "/v1/chats/webhook-latency/read", as: key, body: ["userId": "wr", "messageIds": [message]])
            guard let arrival = await receiver.readArrival(of: message, within: .seconds(10)) else {
                throw BenchFailure("the webhook did not deliver the read of \(message) within 10 s")
            }
            latencies.append(Double((arrival - start) / .microseconds(1)) / 1000)
            try await Task.sleep(for: .milliseconds(5))
        }
        try await self.client.check(204, .DELETE, "/v1/webhooks/latency", as: key)
        results.add("read → idle webhook receiver", latencies: latencies, target: "p50 ≤ 5, p99 ≤ 20", note: "n=\(samples), loopback")
    }

    /// Single mark-reads for `seconds`, without and with a webhook, in interleaved pairs (the
    /// machine is shared: a pair's two runs see about the same noise), then paced at 2,000/s
    /// with it.
    private func writePathWithWebhook(receiver: BenchWebhookReceiver, into results: inout BenchResults) async throws {
        let key = self.tenant.apiKey
        let seconds = max(2.0, 10 * self.scale)
        let pairs = 3
        // Enough messages for 10,000 reads/s per run.
        let perChat = max(200, Int(10_000 * seconds) / self.concurrency)
        let runs = (1...pairs).flatMap { ["plain\($0)", "hooked\($0)"] } + ["paced"]
        for run in runs {
            for index in 0..<self.concurrency {
                let chat = "wh-\(run)-\(index)"
                try await self.client.expect(201, .PUT, "/v1/chats/\(chat)", as: key, body: ["kind": "direct", "members": ["s\(index)", "r\(index)"]])
                try await self.insertMessages(chat: chat, sender: "s\(index)", count: perChat)
            }
        }
        try await self.settleDatabase()

        var plainRates: [Double] = []
        var hookedRates: [Double] = []
        var ratios: [Double] = []
        var costs: [String] = []
        var lag = 0
        var catchUp = 0.0
        var delivered = 0
        for pair in 1...pairs {
            let plain = try await self.markReads(chats: "wh-plain\(pair)-", perChat: perChat, seconds: seconds, rate: nil)
            try await self.client.expect(201, .PUT, "/v1/webhooks/all\(pair)", as: key, body: ["url": receiver.url])
            let before = receiver.eventCount
            let hooked = try await self.markReads(
                chats: "wh-hooked\(pair)-", perChat: perChat, seconds: seconds, rate: nil, watching: "all\(pair)")
            catchUp = max(catchUp, try await self.waitUntilDelivered(webhook: "all\(pair)", within: .seconds(120)))
            delivered += receiver.eventCount - before
            try await self.client.check(204, .DELETE, "/v1/webhooks/all\(pair)", as: key)
            plainRates.append(plain.rate)
            hookedRates.append(hooked.rate)
            ratios.append(100 * hooked.rate / plain.rate)
            costs.append("without: \(plain.cost); with: \(hooked.cost)")
            lag = max(lag, hooked.maximumLag)
        }
        let pairsNote = zip(plainRates, hookedRates).map { String(format: "%.0f → %.0f", $0, $1) }.joined(separator: ", ")
        results.add("mark-read with one webhook (all events) ÷ without", unit: "%", samples: ratios, target: "≥ 90",
                    note: "pairs of \(Int(seconds)) s runs, \(self.concurrency) clients, requests/s without → with: \(pairsNote); "
                        + String(format: "lag max %d events; caught up %.1f s after; %d events delivered; ", lag, catchUp, delivered)
                        + costs.joined(separator: " | "))

        try await self.client.expect(201, .PUT, "/v1/webhooks/paced", as: key, body: ["url": receiver.url])
        let paced = try await self.markReads(chats: "wh-paced-", perChat: perChat, seconds: seconds, rate: 2_000, watching: "paced")
        let pacedCatchUp = try await self.waitUntilDelivered(webhook: "paced", within: .seconds(120))
        results.add("webhook lag at 2,000 reads/s", unit: "events", value: Double(paced.maximumLag), target: "bounded",
                    note: String(format: "max of delivery.pending every 250 ms; load %.0f reads/s; caught up %.1f s after", paced.rate, pacedCatchUp))
        try await self.client.check(204, .DELETE, "/v1/webhooks/paced", as: key)
    }

    /// Marks single messages read in the chats `<prefix>0…`, one client per chat, for
    /// `seconds` (paced to `rate` in all when given); samples the lag of `webhook` meanwhile.
    private func markReads(
        chats prefix: String, perChat: Int, seconds: Double, rate: Double?, watching webhook: String? = nil
    ) async throws -> (rate: Double, maximumLag: Int, cost: String) {
        let client = self.client
        let cpu = CPUTimes.now(servicePID: self.servicePID)
        let key = self.tenant.apiKey
        let deadline = ContinuousClock.now + .seconds(seconds)
        let interval = rate.map { Duration.seconds(Double(self.concurrency) / $0) }
        let start = ContinuousClock.now
        let (marked, lag) = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for index in 0..<self.concurrency {
                group.addTask {
                    var marked = 0
                    var next = ContinuousClock.now
                    for message in 1...perChat where ContinuousClock.now < deadline {
                        try await client.check(200, .POST, "/v1/chats/\(prefix)\(index)/read", as: key,
                                               body: ["userId": "r\(index)", "messageIds": ["\(prefix)\(index)-\(message)"]])
                        marked += 1
                        if let interval {
                            next += interval
                            if next > .now { try await Task.sleep(until: next) }
                        }
                    }
                    return (marked, 0)
                }
            }
            if let webhook {
                group.addTask {
                    var maximum = 0
                    while ContinuousClock.now < deadline {
                        maximum = max(maximum, try await self.pending(webhook: webhook))
                        try await Task.sleep(for: .milliseconds(250))
                    }
                    return (0, maximum)
                }
            }
            return try await group.reduce((0, 0)) { ($0.0 + $1.0, max($0.1, $1.1)) }
        }
        let elapsed = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
        return (Double(marked) / elapsed, lag, CPUTimes.note(since: cpu, servicePID: self.servicePID, requests: marked))
    }

    /// `delivery.pending` of the webhook.
    private func pending(webhook: String) async throws -> Int {
        let answer = try await self.client.expect(200, .GET, "/v1/webhooks/\(webhook)", as: self.tenant.apiKey)
        return (answer["delivery"] as? [String: Any])?["pending"] as? Int ?? -1
    }

    /// Seconds until the webhook has nothing pending.
    private func waitUntilDelivered(webhook: String, within limit: Duration) async throws -> Double {
        let start = ContinuousClock.now
        while try await self.pending(webhook: webhook) > 0 {
            guard ContinuousClock.now - start < limit else { throw BenchFailure("the webhook did not catch up within \(limit)") }
            try await Task.sleep(for: .milliseconds(50))
        }
        return Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
    }
}
