import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Postgres
import TestSupport
import Testing

/// The Patroni cluster the test command started, if any.
enum PatroniCluster {
    static let url = ProcessInfo.processInfo.environment["RECEIPTS_HA_DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
}

/// `receiptsd` on a real Patroni cluster (scripts/ha-cluster.sh: one etcd and three PostgreSQL
/// nodes on loopback), through a switchover, a crash of the primary in synchronous mode, and a
/// failover that loses an asynchronous tail (docs/operations.md, "High availability"). One service
/// instance lives through each, reaching PostgreSQL by the multi-host URL with
/// `target_session_attrs=read-write`, with writers sending and streams open.
///
/// The test command (scripts/test.sh) starts the cluster and sets `RECEIPTS_HA_DATABASE_URL`;
/// without it these tests are skipped. They run one at a time (they fail the cluster over), and
/// so do the read-replica tests nested in this suite (`ReplicaReadTests`).
@Suite(
    "Failover under Patroni", .serialized,
    .enabled(if: PatroniCluster.url != nil, "no Patroni cluster: scripts/test.sh starts one (scripts/ha-cluster.sh)"))
struct PatroniFailoverTests {
    static var clusterURL: String? { PatroniCluster.url }
    static let adminToken = TestDatabase.uniqueName("admin")
    static let script = TestDatabase.packageRoot.appendingPathComponent("scripts/ha-cluster.sh").path

    /// Runs `scripts/ha-cluster.sh <arguments>`; its standard output.
    @discardableResult
    static func cluster(_ arguments: String...) async throws -> String {
        try await TestDatabase.run(Self.script, arguments: arguments).output
    }

    /// The cluster's URL with the database `name` in place of `receipts`.
    static func url(database name: String) throws -> String {
        let url = try #require(Self.clusterURL)
        guard let range = url.range(of: "/receipts?") else { throw URLError(.badURL) }
        return url.replacingCharacters(in: range, with: "/\(name)?")
    }

    /// A new database on the cluster (dropped at the end), and `receiptsd serve` on it. The
    /// cluster is made whole first (every node running and streaming: a test that failed
    /// half-way leaves the next one a cluster to work with).
    static func withService(_ body: (ReceiptsdProcess, _ databaseURL: String) async throws -> Void) async throws {
        try await Self.cluster("start")
        let name = TestDatabase.uniqueName("receipts_ha")
        let admin = try await PostgresConnection.connect(to: PostgresConfiguration(connectionString: try #require(Self.clusterURL)), logger: TestDatabase.logger)
        _ = try await admin.executeScript("CREATE DATABASE \(name)")
        await admin.close()
        let databaseURL = try Self.url(database: name)
        let service = try await ReceiptsdProcess.start(
            arguments: [],
            environment: [
                "DATABASE_URL": databaseURL, "RECEIPTS_ADMIN_TOKEN": Self.adminToken, "LOG_LEVEL": "error",
                "RECEIPTS_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true", "RECEIPTS_WEBHOOK_RETRY_BASE_MILLISECONDS": "100",
            ])
        do {
            try await body(service, databaseURL)
        } catch {
            service.kill()
            throw error
        }
        service.kill()
        // Whichever node leads now.
        if let cleanup = try? await PostgresConnection.connect(
            to: PostgresConfiguration(connectionString: try #require(Self.clusterURL)), logger: TestDatabase.logger)
        {
            _ = try? await cleanup.executeScript("DROP DATABASE \(name) WITH (FORCE)")
            await cleanup.close()
        }
    }

    /// `WebhookFailoverTests.send`, with status 0 when no answer came (the service or the
    /// connection to it failed meanwhile) instead of an error.
    @discardableResult
    static func send(
        _ method: HTTPMethod, _ url: String, as credential: String, json: String? = nil
    ) async -> (status: Int, json: [String: Any]) {
        (try? await WebhookFailoverTests.send(method, url, as: credential, json: json)) ?? (0, [:])
    }

    /// A tenant with the group chat "g" of a, b and c; its API key.
    static func tenant(on service: ReceiptsdProcess) async throws -> String {
        let created = await Self.send(.POST, service.baseURL + "/admin/v1/tenants", as: Self.adminToken, json: #"{"name":"ha"}"#)
        let apiKey = try #require(created.json["apiKey"] as? String)
        #expect(await Self.send(.PUT, service.baseURL + "/v1/chats/g", as: apiKey, json: #"{"kind":"group","members":["a","b","c"]}"#).status == 201)
        return apiKey
    }

    /// What a writer did: each message it sent, once acknowledged, and every answer's status.
    final class Writes: Sendable {
        private let state = NIOLockedValueBox((acknowledged: [String](), statuses: [Int: Int]()))

        func record(_ status: Int, message: String?) {
            self.state.withLockedValue { state in
                state.statuses[status, default: 0] += 1
                if let message { state.acknowledged.append(message) }
            }
        }

        var acknowledged: [String] { self.state.withLockedValue { $0.acknowledged } }
        var statuses: [Int: Int] { self.state.withLockedValue { $0.statuses } }
    }

    /// Sends messages `prefix0`, `prefix1`… to "g" from a, one at a time, each until it is
    /// acknowledged (201, or 200 for one that had committed although its answer was lost: the
    /// same id again is idempotent), with b reading everything after every fifth. Stops after
    /// `count` messages.
    static func write(_ count: Int, prefix: String, to service: ReceiptsdProcess, apiKey: String, writes: Writes) async {
        // No failover here takes a minute: past it, the test fails instead of waiting for ever.
        let deadline = ContinuousClock.now + .seconds(60 + count)
        for index in 0..<count {
            let id = "\(prefix)\(index)"
            while true {
                guard ContinuousClock.now < deadline else {
                    Issue.record("writes failed for longer than the failover could take; last answers: \(writes.statuses)")
                    return
                }
                let answer = await Self.send(
                    .POST, service.baseURL + "/v1/chats/g/messages", as: apiKey, json: #"{"id":"\#(id)","senderId":"a","text":"\#(id)"}"#)
                writes.record(answer.status, message: answer.status == 201 || answer.status == 200 ? id : nil)
                if answer.status == 201 || answer.status == 200 { break }
                #expect(answer.status == 503 || answer.status == 0, "a write answered \(answer.status)")
                try? await Task.sleep(for: .milliseconds(20))
            }
            if index % 5 == 4 {
                while ContinuousClock.now < deadline {
                    let answer = await Self.send(.POST, service.baseURL + "/v1/chats/g/read", as: apiKey, json: #"{"userId":"b"}"#)
                    writes.record(answer.status, message: nil)
                    if answer.status == 200 { break }
                    #expect(answer.status == 503 || answer.status == 0, "a read answered \(answer.status)")
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
        }
    }

    static func ids(_ events: [[String: Any]]) -> [String] { events.compactMap { $0["id"] as? String } }
    static func created(_ events: [[String: Any]]) -> [String] {
        events.filter { $0["type"] as? String == "message.created" }.flatMap { $0["messageIds"] as? [String] ?? [] }
    }

    /// Reads events from `stream` until `condition` holds for all of them (or a deadline), and
    /// then those that follow within half a second of each other (a read's events come after
    /// its message's).
    static func collect(
        _ stream: inout EventReader, within limit: Duration = .seconds(60), until condition: ([[String: Any]]) -> Bool
    ) async -> [[String: Any]] {
        var events: [[String: Any]] = []
        let deadline = ContinuousClock.now + limit
        while !condition(events), ContinuousClock.now < deadline {
            if let event = await stream.next(within: .seconds(5)) { events.append(event) }
        }
        while let event = await stream.next(within: .milliseconds(500)) { events.append(event) }
        return events
    }

    @Test("a switchover under writes and streams: nothing lost, doubled or out of order, no resync, and the old primary is never written to")
    func switchover() async throws {
        try await Self.withService { service, _ in
            let apiKey = try await Self.tenant(on: service)
            let writes = Writes()
            try await StreamClients.withEventSource(port: service.port, credential: apiKey) { live in
                try await StreamClients.withWebSocket(port: service.port, credential: apiKey) { socket, _ in
                    async let writing: Void = Self.write(150, prefix: "s", to: service, apiKey: apiKey, writes: writes)
                    try await Task.sleep(for: .milliseconds(500))
                    try await Self.cluster("switchover")
                    await writing
                    let sent = writes.acknowledged
                    #expect(sent.count == 150)
                    for var stream in [live, socket] {
                        let events = await Self.collect(&stream) { Set(Self.created($0)).isSuperset(of: sent) }
                        #expect(Self.created(events) == sent, "each message once, in the order sent")
                        #expect(!events.contains { $0["type"] as? String == "resync.required" })
                        #expect(Set(Self.ids(events)).count == events.count)
                    }
                }
            }
            // Writes go on after the old primary came back as a replica.
            #expect(await Self.send(.POST, service.baseURL + "/v1/chats/g/messages", as: apiKey, json: #"{"senderId":"a","text":"after"}"#).status == 201)
            print("switchover: answers \(writes.statuses.sorted { $0.key < $1.key })")
        }
    }

    /// When a write first succeeds after `start`, polling every 20 ms: through `service`, or
    /// (`service` nil) straight on the cluster's read-write URL.
    static func firstWrite(after start: ContinuousClock.Instant, through service: ReceiptsdProcess?, apiKey: String) async -> Duration {
        let deadline = start + .seconds(90)
        var probe = 0
        while ContinuousClock.now < deadline {
            probe += 1
            if let service {
                let answer = await Self.send(
                    .POST, service.baseURL + "/v1/chats/g/messages", as: apiKey, json: #"{"id":"probe\#(probe)","senderId":"a","text":"probe"}"#)
                if answer.status == 201 || answer.status == 200 { return .now - start }
            } else if let url = Self.clusterURL,
                let connection = try? await PostgresConnection.connect(
                    to: PostgresConfiguration(connectionString: url, connectTimeoutSeconds: 1), logger: TestDatabase.logger)
            {
                let wrote = (try? await connection.query("SELECT txid_current()")) != nil
                await connection.close()
                if wrote { return .now - start }
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return .now - start
    }

    @Test("a crash of the primary in synchronous mode: no acknowledged write lost, every stream complete; how long writes fail")
    func crashInSynchronousMode() async throws {
        try await Self.cluster("sync", "on")
        do {
            try await Self.withService { service, _ in
                let apiKey = try await Self.tenant(on: service)
                let writes = Writes()
                try await StreamClients.withEventSource(port: service.port, credential: apiKey) { live in
                    async let writing: Void = Self.write(40, prefix: "before", to: service, apiKey: apiKey, writes: writes)
                    await writing
                    let crashed = try await Self.cluster("crash-primary").split(separator: " ")
                    let crashedAt = ContinuousClock.now
                    let node = String(try #require(crashed.first))
                    // Patroni's part: until the new primary takes a write; the service's: until
                    // a write through it answers 2xx. Both polled every 20 ms, side by side.
                    async let database = Self.firstWrite(after: crashedAt, through: nil, apiKey: apiKey)
                    async let throughService = Self.firstWrite(after: crashedAt, through: service, apiKey: apiKey)
                    let (patroni, total) = await (database, throughService)
                    print("failover (synchronous_mode): primary killed → new primary takes writes \(patroni), → first 2xx through receiptsd \(total) (service's part \(total - patroni))")
                    await Self.write(40, prefix: "after", to: service, apiKey: apiKey, writes: writes)
                    let sent = writes.acknowledged
                    let events = await Self.collect(&live) { Set(Self.created($0)).isSuperset(of: sent) }
                    let created = Self.created(events)
                    #expect(Set(created).isSuperset(of: sent), "every acknowledged write's event came")
                    #expect(created.filter { !$0.hasPrefix("probe") } == sent, "once each, in order")
                    #expect(!events.contains { $0["type"] as? String == "resync.required" })
                    try await Self.cluster("revive", node)
                }
            }
        } catch {
            _ = try? await Self.cluster("sync", "off")
            throw error
        }
        try await Self.cluster("sync", "off")
    }

    @Test("a failover that loses an asynchronous tail: no id names two events; streams, resumes and the webhook get resync.required before anything new")
    func lostTail() async throws {
        let receiver = try await WebhookReceiver.start()
        try await Self.withService { service, _ in
            let apiKey = try await Self.tenant(on: service)
            #expect(await Self.send(.PUT, service.baseURL + "/v1/webhooks/hook", as: apiKey, json: #"{"url":"\#(receiver.url)"}"#).status == 201)
            let writes = Writes()
            var kept: [[String: Any]] = []
            var lost: [[String: Any]] = []
            var new: [[String: Any]] = []
            try await StreamClients.withEventSource(port: service.port, credential: apiKey) { live in
                await Self.write(10, prefix: "kept", to: service, apiKey: apiKey, writes: writes)
                kept = await Self.collect(&live) { Set(Self.created($0)).isSuperset(of: writes.acknowledged) }
                try await Self.cluster("cut-replication")
                // Acknowledged by the old primary only: more than the 32 event ids PostgreSQL
                // logs ahead, so that the new primary hands ids out again.
                await Self.write(40, prefix: "lost", to: service, apiKey: apiKey, writes: writes)
                let sentBefore = writes.acknowledged
                lost = await Self.collect(&live) { Set(Self.created(kept + $0)).isSuperset(of: sentBefore) }
                _ = await receiver.waitForEvents(kept.count + lost.count, within: .seconds(30))
                try await Self.cluster("lossy-failover")
                await Self.write(10, prefix: "new", to: service, apiKey: apiKey, writes: writes)
                new = await Self.collect(&live) { Self.created($0).contains("new9") }
            }
            let before = Set(Self.ids(kept + lost))
            #expect(new.first?["type"] as? String == "resync.required", "the stream saw lost events: told first")
            let newIds = Self.ids(Array(new.dropFirst()))
            #expect(Set(newIds).isDisjoint(with: before), "no id names two events")
            #expect(Self.created(new).filter { $0.hasPrefix("new") } == (0..<10).map { "new\($0)" })
            let reused = Set(newIds.compactMap { Int64($0.split(separator: ".")[0]) })
                .intersection(Self.ids(lost).compactMap { Int64($0) })
            print("lost tail: \(lost.count) events lost, \(reused.count) of their numbers handed out again under a new history's ids")

            // Resuming from the last kept id replays what followed it in the new history;
            // from a lost id: resync.required first, then the same.
            let lastKept = try #require(Self.ids(kept).last)
            let after = Array(new.drop { $0["type"] as? String == "resync.required" })
            try await StreamClients.withEventSource(port: service.port, credential: apiKey, lastEventID: lastKept) { resumed in
                let replayed = await resumed.take(after.count)
                #expect(Self.ids(replayed) == Self.ids(after))
            }
            let lostPosition = try #require(Self.ids(lost).last)
            try await StreamClients.withEventSource(port: service.port, credential: apiKey, lastEventID: lostPosition) { resumed in
                let first = await resumed.next()
                #expect(first?["type"] as? String == "resync.required")
                let replayed = await resumed.take(after.count)
                #expect(Self.ids(replayed) == Self.ids(after))
            }
            // The webhook had been sent lost events too: resync.required before the first new one.
            let requests = await receiver.wait(within: .seconds(30)) { requests in
                Set(requests.flatMap(\.eventIds)).isSuperset(of: newIds)
            }
            let events = requests.flatMap(\.events)
            let resync = try #require(events.firstIndex { $0["type"] as? String == "resync.required" })
            #expect(Set(Self.ids(Array(events[..<resync]))).isSubset(of: before))
            #expect(Set(Self.ids(Array(events[(resync + 1)...]))).isDisjoint(with: before))
            print(try await Self.cluster("status"))
        }
        await receiver.stop()
        // The old primary comes back as a replica of the new timeline (pg_rewind), with every
        // other node that is not running.
        _ = try? await Self.cluster("start")
    }
}
