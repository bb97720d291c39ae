import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1
import Postgres

extension BenchScenarios {
    // MARK: - Fairness between tenants

    /// Whether a quiet tenant's everyday requests keep their latency while another tenant
    /// floods the service with expensive ones, and whether the flooding tenant keeps its
    /// throughput (fairness must not waste capacity); docs/operations.md, "Fairness and rate
    /// limits".
    ///
    /// Two tenants of their own, made through the admin API. The quiet one: a group chat of
    /// four where, one request at a time, one member sends, another marks that message read,
    /// and then reads their unread counts. The noisy one: a user in 300 group chats with
    /// three unread messages each, whose unread list the flood reads (3 requests in 4; the
    /// 4th a send into a chat of the connection's own) from up to 24 connections at once
    /// (`concurrency` when smaller, at least 2). A flood connection answered 429 waits its
    /// `Retry-After` (at most 1 s, and not past the phase's end) and goes on.
    ///
    /// Three phases of the same length (10 s at full scale, at least 1 s): the quiet loop
    /// alone, the flood alone, both at once. A phase with the quiet loop lasts until it has
    /// made 200 loops too (20 at small scales), so that its p99 is not just its slowest
    /// request when the flood slows it down. Rows: the quiet p50/p99 per request kind alone
    /// and under the flood, their p99 ratio against "≤ 2 × or ≤ +10 ms, whichever is larger";
    /// the flood's 2xx per second alone and beside the quiet tenant, and their ratio (≥ 0.90);
    /// the 429s each tenant got, and every 5xx.
    func fairness(into results: inout BenchResults) async throws {
        guard let adminToken = self.adminToken else { throw BenchFailure("the fairness scenario needs the service's admin token") }
        let quiet = try await self.client.createTenant(adminToken: adminToken, name: "bench quiet")
        let noisy = try await self.client.createTenant(adminToken: adminToken, name: "bench noisy")
        let chats = self.count(300, minimum: 20)
        let connections = max(2, min(24, self.concurrency))
        try await self.setUpFairness(quiet: quiet, noisy: noisy, chats: chats, connections: connections)

        let phase = Duration.milliseconds(Int(max(1, 10 * self.scale) * 1000))
        let loops = self.count(200, minimum: 20)
        let client = self.client
        var flood = Flood(client: client, apiKey: noisy.apiKey, connections: try await (0..<connections).asyncMap { _ in
            try await client.openStatusConnection()
        })

        // Warm-up, not recorded: the service's sessions plan the statements of both loops.
        _ = try await Self.quietLoop(client: client, apiKey: quiet.apiKey, label: "warm-up", until: .now + phase / 10, loops: 20)
        let warmUp = ContinuousClock.now + phase / 10
        (_, flood) = try await flood.run { ContinuousClock.now < warmUp }

        try await self.settleDatabase()
        let quietAlone = try await Self.quietLoop(client: client, apiKey: quiet.apiKey, label: "alone", until: .now + phase, loops: loops)
        try await self.settleDatabase()
        let floodAlone: Flood.Tally
        let alone = ContinuousClock.now + phase
        (floodAlone, flood) = try await flood.run { ContinuousClock.now < alone }
        try await self.settleDatabase()
        // Until the quiet loop is done.
        let quietDone = NIOLockedValueBox(false)
        let running = flood
        async let flooding = running.run { !quietDone.withLockedValue { $0 } }
        let quietUnderFlood = try await Self.quietLoop(client: client, apiKey: quiet.apiKey, label: "flood", until: .now + phase, loops: loops)
        quietDone.withLockedValue { $0 = true }
        let floodBeside: Flood.Tally
        (floodBeside, flood) = try await flooding
        for connection in flood.connections { await connection.close() }

        for kind in QuietKind.allCases {
            let alone = quietAlone.latencies[kind] ?? []
            let underFlood = quietUnderFlood.latencies[kind] ?? []
            results.add("fairness: quiet \(kind.rawValue), alone", latencies: alone, target: "")
            results.add("fairness: quiet \(kind.rawValue), under the flood", latencies: underFlood, target: "p99 ≤ 2 × alone or ≤ +10 ms")
            let aloneP99 = Self.percentile(0.99, of: alone)
            let floodP99 = Self.percentile(0.99, of: underFlood)
            let limit = max(2 * aloneP99, aloneP99 + 10)
            results.add("fairness: quiet \(kind.rawValue) p99 under the flood ÷ alone", unit: "×", value: floodP99 / aloneP99,
                        target: "≤ 2 (or ≤ +10 ms)",
                        note: String(format: "p99 %.2f ÷ %.2f ms; limit %.2f ms: ", floodP99, aloneP99, limit)
                            + (floodP99 <= limit ? "met" : "missed"))
        }
        let mix = "\(connections) connections; 3 unread lists (a user in \(chats) chats) to 1 send"
        results.add("fairness: flood requests/s alone", unit: "requests/s", value: floodAlone.perSecond, target: "",
                    note: "\(mix); 2xx only; \(floodAlone.refusalNote)")
        results.add("fairness: flood requests/s beside the quiet tenant", unit: "requests/s", value: floodBeside.perSecond, target: "",
                    note: "\(mix); 2xx only; \(floodBeside.refusalNote)")
        results.add("fairness: flood requests/s beside ÷ alone", unit: "×", value: floodBeside.perSecond / floodAlone.perSecond,
                    target: "≥ 0.90", note: String(format: "%.0f ÷ %.0f requests/s", floodBeside.perSecond, floodAlone.perSecond))
        results.add("fairness: 429s to the flood", unit: "responses", value: Double(floodBeside.refused), target: "",
                    note: String(format: "beside the quiet tenant, %.0f/s; alone: %d", Double(floodBeside.refused) / floodBeside.seconds, floodAlone.refused)
                        + (floodAlone.withoutRetryAfter + floodBeside.withoutRetryAfter > 0
                            ? "; \(floodAlone.withoutRetryAfter + floodBeside.withoutRetryAfter) without Retry-After" : ""))
        results.add("fairness: 429s to the quiet tenant", unit: "responses", value: Double(quietUnderFlood.refused), target: "0",
                    note: "under the flood, of \(quietUnderFlood.iterations) loops; alone: \(quietAlone.refused) of \(quietAlone.iterations)")
        let serverErrors = quietAlone.serverErrors + quietUnderFlood.serverErrors + floodAlone.serverErrors + floodBeside.serverErrors
        results.add("fairness: 5xx answers, both tenants", unit: "responses", value: Double(serverErrors), target: "0",
                    note: "quiet \(quietAlone.serverErrors) alone, \(quietUnderFlood.serverErrors) under the flood; "
                        + "flood \(floodAlone.serverErrors) alone, \(floodBeside.serverErrors) beside; "
                        + "flood's other non-2xx \(floodAlone.other + floodBeside.other), failed connections \(floodAlone.failed + floodBeside.failed)")
    }

    /// The data of `fairness`, straight through the SQL functions (setup, not measured). The
    /// noisy tenant: "flood-user" in `chats` group chats of four with three unread messages
    /// each; a group chat "flood-<n>" a flood connection sends into (four other senders). The
    /// quiet tenant: the group chat "quiet" of four.
    private func setUpFairness(
        quiet: (id: String, apiKey: String), noisy: (id: String, apiKey: String), chats: Int, connections: Int
    ) async throws {
        try await self.database.pool.query(
            """
            SELECT receipts.put_chat($1, 'wide-' || g, 'group', ARRAY['flood-user', 'w' || g || '-a', 'w' || g || '-b', 'w' || g || '-c'])
            FROM generate_series(1, $2::int) AS g
            """,
            [noisy.id, chats])
        try await self.database.pool.query(
            """
            SELECT receipts.send_message($1, 'wide-' || g, 'm' || m, 'w' || g || '-' || (ARRAY['a', 'b', 'c'])[m], 'hello')
            FROM generate_series(1, $2::int) AS g, generate_series(1, 3) AS m
            """,
            [noisy.id, chats])
        try await self.database.pool.query(
            "SELECT receipts.put_chat($1, 'flood-' || g, 'group', ARRAY['fs-0', 'fs-1', 'fs-2', 'fs-3']) FROM generate_series(0, $2::int - 1) AS g",
            [noisy.id, connections])
        try await self.database.pool.query(
            "SELECT receipts.put_chat($1, 'quiet', 'group', ARRAY['q-sender', 'q-reader', 'q-c', 'q-d'])", [quiet.id])
        try await self.settleDatabase()
        let unread = try await self.client.expect(200, .GET, "/v1/users/flood-user/unread", as: noisy.apiKey)
        guard unread["total"] as? Int == 3 * chats else {
            throw BenchFailure("fairness: flood-user has \(unread["total"] ?? "?") unread, not \(3 * chats)")
        }
    }

    /// The quiet tenant's request kinds, in loop order.
    private enum QuietKind: String, CaseIterable {
        case send
        case read
        case unread = "unread counts"
    }

    /// What a run of the quiet loop saw: milliseconds per kind (answers as expected only),
    /// and the answers refused or failed.
    private struct QuietRun {
        var latencies: [QuietKind: [Double]] = [:]
        var iterations = 0
        var refused = 0
        var serverErrors = 0
    }

    /// The quiet tenant's everyday loop, one request at a time until `deadline` and at least
    /// `loops` times: q-sender
    /// sends a message (ids "<label>-n"), q-reader marks it read, then reads their unread
    /// counts. A 429 or 5xx is counted (a refused send skips that loop's read); any other
    /// unexpected answer is the bench's fault and ends the run.
    /// How often the quiet tenant begins a loop (send, read, unread counts): 20 a second, 60
    /// requests, an everyday tenant rather than a second flood.
    static let quietPace = Duration.milliseconds(50)

    private static func quietLoop(
        client: BenchClient, apiKey: String, label: String, until deadline: ContinuousClock.Instant, loops: Int
    ) async throws -> QuietRun {
        var run = QuietRun()
        func timed(_ kind: QuietKind, _ expected: Int, _ method: HTTPMethod, _ path: String, body: [String: Any]? = nil) async throws -> Data? {
            let start = ContinuousClock.now
            let (status, data) = try await client.send(method, path, as: apiKey, body: body)
            let milliseconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1000
            switch status {
            case expected:
                run.latencies[kind, default: []].append(milliseconds)
                return data
            case 429: run.refused += 1
            case 500...: run.serverErrors += 1
            default: throw BenchFailure("fairness: \(method) \(path): \(status): \(String(decoding: data.prefix(300), as: UTF8.self))")
            }
            return nil
        }
        var nextLoop = ContinuousClock.now
        while ContinuousClock.now < deadline || run.iterations < loops {
            // Paced: a loop every `quietPace`, so that the quiet tenant asks as much under the
            // flood as alone (a loop late starts at once).
            if nextLoop > .now { try await Task.sleep(until: nextLoop) }
            nextLoop = max(nextLoop + Self.quietPace, .now - Self.quietPace)
            let id = "\(label)-\(run.iterations)"
            run.iterations += 1
            if try await timed(.send, 201, .POST, "/v1/chats/quiet/messages", body: ["id": id, "senderId": "q-sender", "text": "hello"]) != nil,
                let data = try await timed(.read, 200, .POST, "/v1/chats/quiet/read", body: ["userId": "q-reader", "messageIds": [id]])
            {
                let answer = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
                guard answer["marked"] as? Int == 1 else { throw BenchFailure("fairness: the quiet read marked \(answer["marked"] ?? "?"), not 1") }
            }
            _ = try await timed(.unread, 200, .GET, "/v1/users/q-reader/unread")
        }
        return run
    }

    /// `percentile` as `BenchResults` takes it.
    static func percentile(_ q: Double, of latencies: [Double]) -> Double {
        let sorted = latencies.sorted()
        return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(q * Double(sorted.count)))]
    }
}

/// The noisy tenant's flood: its connections, each kept from one run to the next (a
/// connection that fails is replaced).
private struct Flood: Sendable {
    /// What one run of the flood got.
    struct Tally: Sendable {
        var succeeded = 0
        var refused = 0
        var withoutRetryAfter = 0
        var serverErrors = 0
        var other = 0
        var failed = 0
        var seconds = 0.0

        var perSecond: Double { Double(self.succeeded) / self.seconds }
        var refusalNote: String { "\(self.refused) 429s, \(self.serverErrors) 5xx, \(self.other) other non-2xx" }

        static func + (left: Tally, right: Tally) -> Tally {
            Tally(succeeded: left.succeeded + right.succeeded, refused: left.refused + right.refused,
                  withoutRetryAfter: left.withoutRetryAfter + right.withoutRetryAfter,
                  serverErrors: left.serverErrors + right.serverErrors, other: left.other + right.other,
                  failed: left.failed + right.failed, seconds: max(left.seconds, right.seconds))
        }
    }

    let client: BenchClient
    let apiKey: String
    let connections: [LoopbackConnection]

    init(client: BenchClient, apiKey: String, connections: [LoopbackConnection]) {
        self.client = client
        self.apiKey = apiKey
        self.connections = connections
    }

    /// Every connection loops while `going()` (and its task is not cancelled): three GETs of
    /// flood-user's unread list, then a send into its chat "flood-<n>". `seconds` is from the
    /// start until the last connection's last answer. Returns the flood with the connections
    /// it ended with.
    func run(while going: @escaping @Sendable () -> Bool) async throws -> (Tally, Flood) {
        let client = self.client
        let apiKey = self.apiKey
        let start = ContinuousClock.now
        let ended = try await withThrowingTaskGroup(of: (Int, LoopbackConnection, Tally).self) { group in
            for (index, connection) in self.connections.enumerated() {
                group.addTask {
                    var connection = connection
                    var tally = Tally()
                    var sent = 0
                    var request = 0
                    while going() && !Task.isCancelled {
                        request += 1
                        let answer: LoopbackConnection.Answer
                        do {
                            if request.isMultiple(of: 4) {
                                sent += 1
                                answer = try await client.send(
                                    .POST, "/v1/chats/flood-\(index)/messages", as: apiKey,
                                    body: ["senderId": "fs-\(sent % 4)", "text": "flood"], on: connection)
                            } else {
                                answer = try await client.send(.GET, "/v1/users/flood-user/unread", as: apiKey, on: connection)
                            }
                        } catch {
                            tally.failed += 1
                            await connection.close()
                            connection = try await client.openStatusConnection()
                            continue
                        }
                        switch answer.status {
                        case 200..<300:
                            tally.succeeded += 1
                        case 429:
                            tally.refused += 1
                            let asked = answer.retryAfter.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }
                            if asked == nil { tally.withoutRetryAfter += 1 }
                            // In steps, so as not to wait past the phase's end.
                            let waitEnds = ContinuousClock.now + .milliseconds(Int(min(asked ?? 1, 1) * 1000))
                            while going() && ContinuousClock.now < waitEnds {
                                try await Task.sleep(for: min(.milliseconds(20), waitEnds - .now))
                            }
                        case 500...:
                            tally.serverErrors += 1
                        default:
                            tally.other += 1
                        }
                    }
                    return (index, connection, tally)
                }
            }
            return try await group.reduce(into: [(Int, LoopbackConnection, Tally)]()) { $0.append($1) }
        }
        let seconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
        var connections = self.connections
        for (index, connection, _) in ended { connections[index] = connection }
        var tally = ended.map(\.2).reduce(Tally(), +)
        tally.seconds = seconds
        return (tally, Flood(client: client, apiKey: apiKey, connections: connections))
    }
}

extension Sequence {
    /// `map` with an asynchronous transform, one element after the other.
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var mapped: [T] = []
        for element in self { mapped.append(try await transform(element)) }
        return mapped
    }
}
