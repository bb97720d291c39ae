import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

extension BenchScenarios {
    // MARK: - Fairness of the fan-out

    /// Whether one tenant's crowd of streams delays another tenant's events (docs/operations.md,
    /// "Fairness and rate limits"): the quiet tenant's read reaching its stream, alone and while
    /// every event of a crowd tenant goes to thousands of streams.
    ///
    /// Two tenants of their own. The crowd: `streams` tenant-key WebSockets (4,000 at full
    /// scale, fewer when the open-file limit says so), and one connection sending into a group
    /// chat at each rate of `crowdSendsPerSecond` in turn: each send is one event to every crowd
    /// stream.
    /// The quiet tenant: one tenant-key WebSocket and a connection for requests (on a thread of
    /// the bench's own), and a loop paced like the fairness scenario's (`quietPace`): q-sender sends, q-reader marks the
    /// message read, and the time from the read's request to its `receipt.read` on the stream
    /// is recorded, with the read's answer. Rows: those times' p50/p99 alone and beside each
    /// crowd, the p99 ratio against "≤ 2 × or ≤ +10 ms, whichever is larger", and the crowd's
    /// frames received against the writes asked.
    func streamFairness(into results: inout BenchResults) async throws {
        guard let adminToken = self.adminToken else { throw BenchFailure("the fan-out fairness scenario needs the service's admin token") }
        guard let url = URL(string: self.client.baseURL), let host = url.host, let port = url.port else {
            throw BenchFailure("the service URL has no host and port")
        }
        let quiet = try await self.client.createTenant(adminToken: adminToken, name: "bench quiet streams")
        let crowd = try await self.client.createTenant(adminToken: adminToken, name: "bench crowd")
        try await self.client.expect(201, .PUT, "/v1/chats/quiet", as: quiet.apiKey, body: ["kind": "group", "members": ["q-sender", "q-reader"]])
        try await self.client.expect(201, .PUT, "/v1/chats/crowd", as: crowd.apiKey, body: ["kind": "group", "members": ["c-0", "c-1", "c-2", "c-3"]])

        let streams = min(self.count(4000, minimum: 50), Self.maximumStreams(databasePoolSize: 10) - 100)
        let sources = (1...8).map { "127.0.0.\($0)" }
        let crowdProbes = StreamProbes()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<streams {
                if index >= 256 { try await group.next() }
                group.addTask { try await crowdProbes.open(host: host, port: port, source: sources[index % sources.count], credential: crowd.apiKey) }
            }
            try await group.waitForAll()
        }
        // The quiet tenant's stream and requests on a thread of their own: its backend and
        // devices are not on the machine that reads the crowd's thousands of streams, and the
        // bench's loops are busy reading them.
        let quietLoop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let quietProbe = StreamProbes(group: quietLoop)
        let client = try BenchClient(baseURL: self.client.baseURL, group: quietLoop)
        try await quietProbe.open(host: host, port: port, source: "127.0.0.1", credential: quiet.apiKey)
        try await Task.sleep(for: .seconds(1))

        let loops = self.count(200, minimum: 20)
        _ = try await Self.quietStreamLoop(client: client, apiKey: quiet.apiKey, probe: quietProbe, label: "warm-up", loops: 10)
        try await self.settleDatabase()
        let alone = try await Self.quietStreamLoop(client: client, apiKey: quiet.apiKey, probe: quietProbe, label: "alone", loops: loops)

        var underCrowd: [(rate: Int, quiet: (toStream: [Double], answered: [Double]), crowd: CrowdRun)] = []
        for rate in Self.crowdSendsPerSecond {
            try await self.settleDatabase()
            let crowdDone = NIOLockedValueBox(false)
            async let crowdRun = Self.crowd(client: self.client, apiKey: crowd.apiKey, probes: crowdProbes, perSecond: rate) {
                crowdDone.withLockedValue { $0 }
            }
            try await Task.sleep(for: .seconds(1))
            let quietRun = try await Self.quietStreamLoop(client: client, apiKey: quiet.apiKey, probe: quietProbe, label: "crowd\(rate)", loops: loops)
            crowdDone.withLockedValue { $0 = true }
            underCrowd.append((rate, quietRun, try await crowdRun))
        }
        let stillOpen = crowdProbes.openCount
        await crowdProbes.closeAll()
        await quietProbe.closeAll()
        await client.shutdown()
        try await quietLoop.shutdownGracefully()

        results.add("fan-out fairness: quiet read → its stream, alone", latencies: alone.toStream, target: "")
        results.add("fan-out fairness: quiet read's answer, alone", latencies: alone.answered, target: "")
        let aloneP99 = Self.percentile(0.99, of: alone.toStream)
        let limit = max(2 * aloneP99, aloneP99 + 10)
        for (rate, quietRun, crowdRun) in underCrowd {
            let label = "a crowd of \(streams) streams, \(rate) events/s"
            results.add("fan-out fairness: quiet read → its stream, beside \(label)", latencies: quietRun.toStream, target: "p99 ≤ 2 × alone or ≤ +10 ms")
            results.add("fan-out fairness: quiet read's answer, beside \(label)", latencies: quietRun.answered, target: "")
            let crowdP99 = Self.percentile(0.99, of: quietRun.toStream)
            results.add("fan-out fairness: quiet p99 beside \(label) ÷ alone", unit: "×", value: crowdP99 / aloneP99, target: "≤ 2 (or ≤ +10 ms)",
                        note: String(format: "p99 %.2f ÷ %.2f ms; limit %.2f ms: ", crowdP99, aloneP99, limit) + (crowdP99 <= limit ? "met" : "missed"))
            results.add("fan-out fairness: crowd events delivered ÷ asked, \(label)", unit: "×", value: crowdRun.delivered / (crowdRun.sent * Double(streams)),
                        target: "", note: String(format: "%.0f of %.0f writes a second (%.1f sends/s to %d streams)",
                                                 crowdRun.delivered / crowdRun.seconds, crowdRun.sent * Double(streams) / crowdRun.seconds,
                                                 crowdRun.sent / crowdRun.seconds, streams))
        }
        results.add("fan-out fairness: crowd streams still open at the end", unit: "streams", value: Double(stillOpen), target: "\(streams)")
    }

    /// The crowd's sends a second in each phase, each an event to every crowd stream: within
    /// what this machine writes (32,000 writes a second to 4,000 streams), and past it.
    static let crowdSendsPerSecond = [8, 20]

    /// What a phase of the crowd did: sends, and the crowd's frames its streams received
    /// (every event, not only the sends': `delivered` may exceed sends × streams).
    struct CrowdRun: Sendable {
        let sent: Double
        let delivered: Double
        let seconds: Double
    }

    /// The crowd tenant sends into its group chat `perSecond` times a second until `done()`.
    private static func crowd(
        client: BenchClient, apiKey: String, probes: StreamProbes, perSecond: Int, done: @escaping @Sendable () -> Bool
    ) async throws -> CrowdRun {
        let start = ContinuousClock.now
        let framesBefore = probes.framesReceived
        var next = start
        var sent = 0
        while !done() {
            if next > .now { try await Task.sleep(until: next) }
            next = max(next + .milliseconds(1000 / perSecond), .now - .milliseconds(100))
            sent += 1
            try await client.expect(201, .POST, "/v1/chats/crowd/messages", as: apiKey, body: ["senderId": "c-\(sent % 4)", "text": "crowd"])
        }
        // What was sent has a moment to arrive.
        try await Task.sleep(for: .milliseconds(500))
        let seconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
        return CrowdRun(sent: Double(sent), delivered: Double(probes.framesReceived - framesBefore), seconds: seconds)
    }

    /// The quiet tenant's loop, `loops` times, paced every `quietPace`: q-sender sends a
    /// message ("<label>-n"), q-reader marks it read; returns the milliseconds from each read's
    /// request to its `receipt.read` on `probe`'s stream (10 s at most).
    private static func quietStreamLoop(
        client: BenchClient, apiKey: String, probe: StreamProbes, label: String, loops: Int
    ) async throws -> (toStream: [Double], answered: [Double]) {
        var latencies: [Double] = []
        var answered: [Double] = []
        var nextLoop = ContinuousClock.now
        for index in 0..<loops {
            if nextLoop > .now { try await Task.sleep(until: nextLoop) }
            nextLoop = max(nextLoop + Self.quietPace, .now - Self.quietPace)
            let id = "\(label)-\(index)"
            try await client.expect(201, .POST, "/v1/chats/quiet/messages", as: apiKey, body: ["id": id, "senderId": "q-sender", "text": "hello"])
            probe.expect([#""type":"receipt.read""#, "\"\(id)\""])
            let start = ContinuousClock.now
            try await client.expect(200, .POST, "/v1/chats/quiet/read", as: apiKey, body: ["userId": "q-reader", "messageIds": [id]])
            answered.append(Double((ContinuousClock.now - start) / .microseconds(1)) / 1000)
            let deadline = start + .seconds(10)
            while probe.arrivalTimes.isEmpty {
                guard ContinuousClock.now < deadline else { throw BenchFailure("fan-out fairness: \(id)'s receipt.read did not reach the quiet stream in 10 s") }
                try await Task.sleep(for: .microseconds(200))
            }
            latencies.append(Double((probe.arrivalTimes[0] - start) / .microseconds(1)) / 1000)
        }
        return (latencies, answered)
    }
}
