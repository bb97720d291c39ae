import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Postgres
import TestSupport
import Testing

/// Faults of PostgreSQL and of the service itself, against a running `receiptsd` and a
/// PostgreSQL cluster of the test's own (the shared test cluster is never restarted).
@Suite("Database faults", .serialized)
struct DatabaseFaultTests {
    @Test("under writers and three resuming streams, four faults lose nothing acknowledged, deliver every event once and in order, and never answer 500")
    func faults() async throws {
        let cluster = try await PrivateCluster.start()
        defer { cluster.remove() }
        let adminToken = TestDatabase.uniqueName("admin")
        let environment = [
            "DATABASE_URL": cluster.url, "RECEIPTS_ADMIN_TOKEN": adminToken, "RECEIPTS_DATABASE_TIMEOUT_SECONDS": "2",
            "LOG_LEVEL": "critical",
        ]
        let target = Target(try await ReceiptsdProcess.start(arguments: [], environment: environment))
        defer {
            Foundation.kill(target.service.process.processIdentifier, SIGKILL)
            target.service.process.waitUntilExit()
        }
        let client = FaultClient(http: HTTPClient.shared, target: target)

        // A tenant, a chat, and a token for each member.
        let created = try await client.send(.POST, "/admin/v1/tenants", as: adminToken, json: ["name": "faults"])
        let apiKey = try #require(created.json["apiKey"] as? String)
        let tenant = try #require(created.json["id"] as? String)
        #expect(try await client.send(.PUT, "/v1/chats/g", as: apiKey, json: ["kind": "group", "members": ["a", "b"]]).status == 201)
        let tokenA = try #require(try await client.send(.POST, "/v1/tokens", as: apiKey, json: ["userId": "a"]).json["token"] as? String)
        let tokenB = try #require(try await client.send(.POST, "/v1/tokens", as: apiKey, json: ["userId": "b"]).json["token"] as? String)

        // Three streams that resume from their last id whenever they drop.
        let streams = [
            ResumingStream(name: "WebSocket of user b", kind: .webSocket, credential: tokenB, audience: "b"),
            ResumingStream(name: "SSE of user a", kind: .serverSentEvents, credential: tokenA, audience: "a"),
            ResumingStream(name: "SSE of the tenant key", kind: .serverSentEvents, credential: apiKey, audience: nil),
        ]
        let readiness = ReadinessWatch()
        let writers = Writers(client: client, apiKey: apiKey)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for stream in streams { group.addTask { await stream.run(target: target) } }
            group.addTask { await readiness.run(client: client) }
            for stream in streams {
                let deadline = ContinuousClock.now + .seconds(15)
                while !stream.hasConnected, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
                try #require(stream.hasConnected, "\(stream.name) did not connect")
            }
            // Every event after this one is for the streams.
            let baseline = try await cluster.query { try await $0.query("SELECT coalesce(max(event_id), 0) FROM receipts.events").scalar(Int64.self) }
            for writer in 0..<2 { group.addTask { await writers.run(writer: writer) } }

            /// Lets the writers work, applies `fault`, waits for the service to be ready again,
            /// then checks everything acknowledged so far.
            func check(after fault: String, expectingUnready: Bool, _ apply: () async throws -> Void) async throws {
                try await Task.sleep(for: .milliseconds(800))
                let unreadyBefore = readiness.unreadyAnswers
                try await apply()
                // The contract's own bounds are asserted inside each fault; this one only waits
                // for the service to settle, generously, as the rest of the suite runs beside it.
                try await readiness.waitUntilReady(within: .seconds(30), after: fault)
                if expectingUnready {
                    #expect(readiness.unreadyAnswers > unreadyBefore, "/readyz never answered 503 during \(fault)")
                }
                try await Task.sleep(for: .milliseconds(800))
                await writers.pause()
                try await Self.verify(
                    after: fault, cluster: cluster, tenant: tenant, baseline: baseline, writers: writers, streams: streams)
                writers.resume()
            }

            // (a) The LISTEN connection is terminated: the listener reconnects (a new session)
            // and the hub reads the log from its cursor.
            try await check(after: "terminating the listener's connection", expectingUnready: false) {
                let old = try await cluster.listenerPID()
                _ = try await cluster.query {
                    try await $0.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'receiptsd-listener'")
                }
                let deadline = ContinuousClock.now + .seconds(5)
                var new = try await cluster.listenerPID()
                while new == nil || new == old, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                    new = try await cluster.listenerPID()
                }
                #expect(new != nil && new != old, "the listener did not reconnect within 5 s")
            }
            // (b) Every session of the service is terminated.
            try await check(after: "terminating every connection of the service", expectingUnready: false) {
                _ = try await cluster.query {
                    try await $0.query(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'receiptsd%' AND pid <> pg_backend_pid()")
                }
            }
            // (c) PostgreSQL restarts. While it is down, /readyz is 503 within 2 s and an API
            // request is 503 `unavailable` within the database timeout; it is ready within 5 s
            // of PostgreSQL's return.
            try await check(after: "restarting PostgreSQL", expectingUnready: true) {
                try await cluster.stop()
                let stopped = ContinuousClock.now
                try await readiness.waitUntilUnready(within: .seconds(2), after: "PostgreSQL stopped")
                let unreadyAfterStop = ContinuousClock.now - stopped
                #expect(unreadyAfterStop < .seconds(2))
                let asked = ContinuousClock.now
                let unread = try await client.send(.GET, "/v1/users/b/unread", as: apiKey)
                print("faults: stopped PostgreSQL: GET unread \(unread.status) after \(ContinuousClock.now - asked)")
                #expect(unread.status == 503)
                #expect(unread.errorCode == "unavailable")
                #expect(ContinuousClock.now - asked < .seconds(2.5), "GET unread waited \(ContinuousClock.now - asked)")
                try await Task.sleep(for: .milliseconds(500))
                try await cluster.start()
                let back = ContinuousClock.now
                try await readiness.waitUntilReady(within: .seconds(5), after: "PostgreSQL's return")
                print("faults: /readyz 503 \(unreadyAfterStop) after PostgreSQL stopped, 200 \(ContinuousClock.now - back) after it was back")
            }
            // (e) PostgreSQL freezes (every process stopped; its host still accepts and
            // acknowledges): neither statement_timeout nor a cancel request can act. /readyz
            // is 503 within 2 s; a request is 503 at its deadline, the database timeout
            // (2 s here), plus 1 s for the answer on a loaded machine: its call is left to
            // the pool, which drops the connection under it.
            try await check(after: "freezing PostgreSQL", expectingUnready: true) {
                // The request timed below must find an idle connection and wait on the frozen
                // server, not for the pool (whose wait is bounded anyway): the writers' stalled
                // batches would take every connection, so they pause until it has answered.
                await writers.pause()
                try await cluster.signal("STOP")
                let frozen = ContinuousClock.now
                try await readiness.waitUntilUnready(within: .seconds(2), after: "PostgreSQL froze")
                let unreadyAfterFreeze = ContinuousClock.now - frozen
                #expect(unreadyAfterFreeze < .seconds(2))
                let asked = ContinuousClock.now
                let unread = try await client.send(.GET, "/v1/users/b/unread", as: apiKey)
                print("faults: frozen PostgreSQL: /readyz 503 after \(unreadyAfterFreeze), GET unread \(unread.status) after \(ContinuousClock.now - asked)")
                #expect(unread.status == 503)
                #expect(unread.errorCode == "unavailable")
                #expect(ContinuousClock.now - asked < .seconds(3), "GET unread waited \(ContinuousClock.now - asked)")
                // So is a WebSocket upgrade whose credential needs the database (a token of a
                // tenant whose secret this instance has not read yet).
                let upgrade = try await RawConnection.open(port: target.port)
                let upgradeAsked = ContinuousClock.now
                try await upgrade.send(
                    "GET /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                        + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        + "Authorization: Bearer \(DatabaseTimeoutTests.forgedToken(tenant: "not-read-yet"))\r\n\r\n")
                let upgradeAnswer = try await upgrade.answer(within: .seconds(5))
                upgrade.close()
                print("faults: frozen PostgreSQL: WebSocket upgrade \(upgradeAnswer?.status ?? 0) after \(ContinuousClock.now - upgradeAsked)")
                #expect(upgradeAnswer?.status == 503)
                #expect(ContinuousClock.now - upgradeAsked < .seconds(3), "the upgrade waited \(ContinuousClock.now - upgradeAsked)")
                // The writers meet the frozen server too before it thaws (503, never 500).
                writers.resume()
                try await Task.sleep(for: .seconds(1))
                try await cluster.signal("CONT")
                try await readiness.waitUntilReady(within: .seconds(5), after: "PostgreSQL thawed")
            }
            // (d) The service is killed and started again (on another port; clients follow).
            try await check(after: "kill -9 of the service and a new start", expectingUnready: false) {
                // SIGKILL whatever Foundation believes of the process (its isRunning can read
                // false for a live child), then until its port is closed.
                let old = target.service
                Foundation.kill(old.process.processIdentifier, SIGKILL)
                let deadline = ContinuousClock.now + .seconds(5)
                while (try? await client.send(.GET, "/healthz")) != nil, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect((try? await client.send(.GET, "/healthz")) == nil, "the killed service still answers")
                target.replace(with: try await ReceiptsdProcess.start(arguments: [], environment: environment))
            }

            await writers.stop()
            for stream in streams { stream.stop() }
            readiness.stop()
            group.cancelAll()
        }
        #expect(writers.serverErrors.isEmpty, "answers other than 503 among the 5xx: \(writers.serverErrors.prefix(5))")
        #expect(readiness.serverErrors.isEmpty, "/readyz answered \(readiness.serverErrors.prefix(5))")
        #expect(writers.acknowledgedSends.count > 20, "the writers got too little done: \(writers.acknowledgedSends.count) sends")
        for stream in streams {
            #expect(stream.resyncs == 0, "\(stream.name) was told to resync")
            #expect(stream.connections > 1, "\(stream.name) never had to resume")
        }
        print(
            "faults: \(writers.acknowledgedSends.count) sends and \(writers.acknowledgedReads.count) reads acknowledged; "
                + "statuses \(writers.statusCounts.sorted { $0.key < $1.key }); "
                + streams.map { "\($0.name): \($0.ids.count) events over \($0.connections) connections" }.joined(separator: "; "))
    }

    /// Nothing acknowledged is missing from the database, and each stream has received
    /// exactly the events of the log it may see, after `baseline`, in order, each once.
    static func verify(
        after fault: String, cluster: PrivateCluster, tenant: String, baseline: Int64, writers: Writers, streams: [ResumingStream]
    ) async throws {
        let (sends, reads) = (writers.acknowledgedSends, writers.acknowledgedReads)
        let (stored, readByB) = try await cluster.query { connection in
            let stored = Set(
                try await connection.query("SELECT message_id::text FROM receipts.messages WHERE tenant_id = $1", [tenant])
                    .map { try $0.decode(String.self, column: 0) })
            let readByB = Set(
                try await connection.query(
                    "SELECT message_id::text FROM receipts.receipt_chunks WHERE tenant_id = $1 AND 'b' = ANY (read_by)", [tenant]
                ).map { try $0.decode(String.self, column: 0) })
            return (stored, readByB)
        }
        let lostSends = sends.filter { !stored.contains($0) }
        let lostReads = reads.filter { !readByB.contains($0) }
        #expect(lostSends.isEmpty, "after \(fault): acknowledged sends missing from the database: \(lostSends.prefix(5))")
        #expect(lostReads.isEmpty, "after \(fault): acknowledged reads missing from the database: \(lostReads.prefix(5))")

        let log = try await cluster.query { connection in
            try await connection.query(
                """
                SELECT event.event_id,
                       coalesce(event.audience, (SELECT members.audience FROM receipts.audience_at(
                                                     event.tenant_id, event.chat_id, event.audience_version) AS members))::text[]
                FROM receipts.events AS event WHERE event.tenant_id = $1 AND event.event_id > $2 ORDER BY event.event_id
                """,
                [tenant, baseline]
            ).map { (id: String(try $0.decode(Int64.self, column: 0)), audience: try $0.decode([String].self, column: 1)) }
        }
        for stream in streams {
            let expected = log.filter { event in stream.audience.map { event.audience.contains($0) } ?? true }.map(\.id)
            // The stream catches up on its own time (returns as soon as it has): up to 30 s, as
            // the rest of the suite runs beside it on two cores.
            let deadline = ContinuousClock.now + .seconds(30)
            while stream.ids != expected, stream.ids.count <= expected.count, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            let received = stream.ids
            if received != expected {
                let duplicates = Dictionary(grouping: received, by: { $0 }).filter { $0.value.count > 1 }.keys
                let missing = Set(expected).subtracting(received)
                Issue.record(
                    """
                    after \(fault): \(stream.name) received \(received.count) events, expected \(expected.count); \
                    missing \(missing.sorted().prefix(5)), twice \(duplicates.sorted().prefix(5)), \
                    in order: \(received.filter { Set(expected).contains($0) } == expected.filter { Set(received).contains($0) })
                    """)
            }
        }
    }
}

// MARK: - The test's own PostgreSQL

/// A PostgreSQL cluster in a temporary directory (`RECEIPTS_STATE_DIR=… scripts/postgres.sh`).
final class PrivateCluster: Sendable {
    let directory: URL
    let url: String

    private init(directory: URL, url: String) {
        self.directory = directory
        self.url = url
    }

    static func start() async throws -> PrivateCluster {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(TestDatabase.uniqueName("receipts-faults"))
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let output = try await Self.script("start", directory: directory)
        guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("DATABASE_URL=") }) else {
            throw SetupFailure(description: "postgres.sh start printed no DATABASE_URL: \(output)")
        }
        return PrivateCluster(directory: directory, url: String(line.dropFirst("DATABASE_URL=".count)))
    }

    func stop() async throws { _ = try await Self.script("stop", directory: self.directory) }
    func start() async throws { _ = try await Self.script("start", directory: self.directory) }

    /// Stops the cluster and deletes its files (also those of a cluster placed elsewhere).
    func remove() {
        let directory = self.directory
        let done = DispatchSemaphore(value: 0)
        Thread {
            _ = try? TestDatabase.runScript("scripts/postgres.sh", arguments: ["stop"], environment: ["RECEIPTS_STATE_DIR": directory.path])
            if let elsewhere = try? String(contentsOf: directory.appendingPathComponent("postgres/datadir"), encoding: .utf8) {
                try? FileManager.default.removeItem(
                    at: URL(fileURLWithPath: elsewhere.trimmingCharacters(in: .whitespacesAndNewlines)).deletingLastPathComponent())
            }
            try? FileManager.default.removeItem(at: directory)
            done.signal()
        }.start()
        done.wait()
    }

    /// Runs `body` on a connection of the login role (a superuser: beyond row-level security).
    func query<Result: Sendable>(_ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        let connection = try await PostgresConnection.connect(
            to: PostgresConfiguration(connectionString: self.url, applicationName: "fault-test"), logger: TestDatabase.logger)
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Sends `signal` (STOP, CONT) to the cluster's postmaster and every process it started.
    func signal(_ signal: String) async throws {
        var dataDirectory = self.directory.appendingPathComponent("postgres/data")
        if let elsewhere = try? String(contentsOf: self.directory.appendingPathComponent("postgres/datadir"), encoding: .utf8) {
            dataDirectory = URL(fileURLWithPath: elsewhere.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let pidFile = try String(contentsOf: dataDirectory.appendingPathComponent("postmaster.pid"), encoding: .utf8)
        guard let postmaster = pidFile.split(separator: "\n").first.flatMap({ Int32($0) }) else {
            throw SetupFailure(description: "no postmaster pid in \(dataDirectory.path)")
        }
        // A number read from the pid file, and a signal name from the test: no input of others.
        try await TestDatabase.run("/bin/sh", arguments: ["-c", "kill -\(signal) \(postmaster); pkill -\(signal) -P \(postmaster); true"])
    }

    func listenerPID() async throws -> Int32? {
        try await self.query {
            try await $0.query("SELECT pid FROM pg_stat_activity WHERE application_name = 'receiptsd-listener'").first?.decode(Int32.self, column: 0)
        }
    }

    private static func script(_ command: String, directory: URL) async throws -> String {
        try await TestDatabase.run(
            TestDatabase.packageRoot.appendingPathComponent("scripts/postgres.sh").path, arguments: [command],
            environment: ["RECEIPTS_STATE_DIR": directory.path]
        ).output
    }
}

struct SetupFailure: Error, CustomStringConvertible {
    var description: String
}

// MARK: - Clients

/// The running service, which a restart moves to another port.
final class Target: Sendable {
    private let state: NIOLockedValueBox<ReceiptsdProcess>

    init(_ service: ReceiptsdProcess) { self.state = NIOLockedValueBox(service) }

    var service: ReceiptsdProcess { self.state.withLockedValue { $0 } }
    var port: Int { self.service.port }
    func replace(with service: ReceiptsdProcess) { self.state.withLockedValue { $0 = service } }
}

struct FaultResponse {
    let status: Int
    let body: String
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(self.body.utf8))) as? [String: Any] ?? [:] }
    var errorCode: String? { (self.json["error"] as? [String: Any])?["code"] as? String }
}

struct FaultClient: Sendable {
    let http: HTTPClient
    let target: Target

    /// One request to the service as it runs now; throws when it cannot be reached.
    func send(_ method: HTTPMethod, _ path: String, as credential: String? = nil, json: [String: Any]? = nil) async throws -> FaultResponse {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(self.target.port)\(path)")
        request.method = method
        if let credential { request.headers.add(name: "Authorization", value: "Bearer \(credential)") }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: Array(try JSONSerialization.data(withJSONObject: json))))
        }
        let response = try await self.http.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        return FaultResponse(status: Int(response.status.code), body: String(buffer: body))
    }
}

/// Sends messages from a and marks each read by b, over and over, remembering what the
/// service acknowledged and any 5xx other than 503.
final class Writers: Sendable {
    private struct State {
        var acknowledgedSends: [String] = []
        var acknowledgedReads: [String] = []
        var statusCounts: [Int: Int] = [:]
        var serverErrors: [String] = []
        var paused = false
        var stopped = false
        var busy = 0
    }

    let client: FaultClient
    let apiKey: String
    private let state = NIOLockedValueBox(State())

    init(client: FaultClient, apiKey: String) {
        self.client = client
        self.apiKey = apiKey
    }

    var acknowledgedSends: [String] { self.state.withLockedValue { $0.acknowledgedSends } }
    var acknowledgedReads: [String] { self.state.withLockedValue { $0.acknowledgedReads } }
    var statusCounts: [Int: Int] { self.state.withLockedValue { $0.statusCounts } }
    var serverErrors: [String] { self.state.withLockedValue { $0.serverErrors } }

    func run(writer: Int) async {
        var number = 0
        while !Task.isCancelled {
            let go = self.state.withLockedValue { state -> Bool? in
                if state.stopped { return nil }
                if state.paused { return false }
                state.busy += 1
                return true
            }
            guard let go else { return }
            guard go else {
                try? await Task.sleep(for: .milliseconds(10))
                continue
            }
            number += 1
            let id = "w\(writer)-\(number)"
            if let sent = await self.attempt(.POST, "/v1/chats/g/messages", json: ["id": id, "senderId": "a", "text": "message \(number)"]),
                sent.status == 201 || sent.status == 200
            {
                self.state.withLockedValue { $0.acknowledgedSends.append(id) }
                if let read = await self.attempt(.POST, "/v1/chats/g/read", json: ["userId": "b", "messageIds": [id]]), read.status == 200 {
                    self.state.withLockedValue { $0.acknowledgedReads.append(id) }
                }
            }
            self.state.withLockedValue { $0.busy -= 1 }
            try? await Task.sleep(for: .milliseconds(15))
        }
    }

    private func attempt(_ method: HTTPMethod, _ path: String, json: [String: Any]) async -> FaultResponse? {
        let response = try? await self.client.send(method, path, as: self.apiKey, json: json)
        self.state.withLockedValue { state in
            state.statusCounts[response?.status ?? 0, default: 0] += 1
            if let response, response.status >= 500, response.status != 503 {
                state.serverErrors.append("\(method) \(path): \(response.status) \(response.body)")
            }
        }
        if response == nil || response?.status == 503 { try? await Task.sleep(for: .milliseconds(50)) }
        return response
    }

    /// Stops taking new work and waits for the requests under way.
    func pause() async {
        self.state.withLockedValue { $0.paused = true }
        while self.state.withLockedValue({ $0.busy > 0 }) { try? await Task.sleep(for: .milliseconds(10)) }
    }

    func resume() { self.state.withLockedValue { $0.paused = false } }

    func stop() async {
        self.state.withLockedValue { $0.stopped = true }
        while self.state.withLockedValue({ $0.busy > 0 }) { try? await Task.sleep(for: .milliseconds(10)) }
    }
}

/// Asks `/readyz` every 20 ms and counts its answers.
final class ReadinessWatch: Sendable {
    private struct State {
        var lastStatus: Int?
        var unreadyAnswers = 0
        var serverErrors: [Int] = []
        var stopped = false
    }

    private let state = NIOLockedValueBox(State())

    var unreadyAnswers: Int { self.state.withLockedValue { $0.unreadyAnswers } }
    var serverErrors: [Int] { self.state.withLockedValue { $0.serverErrors } }

    func run(client: FaultClient) async {
        while !Task.isCancelled, !self.state.withLockedValue({ $0.stopped }) {
            let status = (try? await client.send(.GET, "/readyz"))?.status
            self.state.withLockedValue { state in
                state.lastStatus = status
                if status == 503 { state.unreadyAnswers += 1 }
                if let status, status >= 500, status != 503 { state.serverErrors.append(status) }
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    func stop() { self.state.withLockedValue { $0.stopped = true } }

    func waitUntilReady(within limit: Duration, after what: String) async throws {
        try await self.wait(for: 200, within: limit, after: what)
    }

    func waitUntilUnready(within limit: Duration, after what: String) async throws {
        try await self.wait(for: 503, within: limit, after: what)
    }

    private func wait(for status: Int, within limit: Duration, after what: String) async throws {
        let deadline = ContinuousClock.now + limit
        while self.state.withLockedValue({ $0.lastStatus }) != status {
            guard ContinuousClock.now < deadline else {
                Issue.record("/readyz did not answer \(status) within \(limit) of \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// A stream client that reconnects after any drop, resuming from the last id it received
/// (`?after=` for WebSocket, `Last-Event-ID` for SSE), and records every event id in order.
final class ResumingStream: Sendable {
    enum Kind: Sendable { case webSocket, serverSentEvents }

    private struct State {
        var ids: [String] = []
        var lastId: String?
        var connections = 0
        var resyncs = 0
        var stopped = false
    }

    let name: String
    let kind: Kind
    let credential: String
    /// The user whose events the stream gets; nil for the tenant key (all of them).
    let audience: String?
    private let state = NIOLockedValueBox(State())
    private static let logger = Logger(label: "fault-stream")

    init(name: String, kind: Kind, credential: String, audience: String?) {
        self.name = name
        self.kind = kind
        self.credential = credential
        self.audience = audience
    }

    var ids: [String] { self.state.withLockedValue { $0.ids } }
    var connections: Int { self.state.withLockedValue { $0.connections } }
    var resyncs: Int { self.state.withLockedValue { $0.resyncs } }
    var hasConnected: Bool { self.connections > 0 }
    func stop() { self.state.withLockedValue { $0.stopped = true } }
    private var isStopped: Bool { self.state.withLockedValue { $0.stopped } }

    func run(target: Target) async {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        while !Task.isCancelled, !self.isStopped {
            let after = self.state.withLockedValue { $0.lastId }
            switch self.kind {
            case .webSocket: try? await self.followWebSocket(port: target.port, after: after)
            case .serverSentEvents: try? await self.followEventSource(http: http, port: target.port, after: after)
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        try? await http.shutdown()
    }

    private func receive(_ json: String) {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any], let id = object["id"] as? String
        else { return }
        self.state.withLockedValue { state in
            if object["type"] as? String == "resync.required" {
                state.resyncs += 1
            } else {
                state.ids.append(id)
            }
            state.lastId = id
        }
    }

    private func opened() { self.state.withLockedValue { $0.connections += 1 } }

    private func followWebSocket(port: Int, after: String?) async throws {
        var configuration = WebSocketClientConfiguration()
        configuration.additionalHeaders = [.authorization: "Bearer \(self.credential)"]
        let url = "ws://127.0.0.1:\(port)/v1/stream" + (after.map { "?after=\($0)" } ?? "")
        try await WebSocketClient.connect(url: url, configuration: configuration, logger: Self.logger) { inbound, _, _ in
            self.opened()
            for try await message in inbound.messages(maxSize: 1 << 24) {
                if case .text(let text) = message { self.receive(text) }
                if self.isStopped { return }
            }
        }
    }

    private func followEventSource(http: HTTPClient, port: Int, after: String?) async throws {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/events")
        request.headers.add(name: "Authorization", value: "Bearer \(self.credential)")
        if let after { request.headers.add(name: "Last-Event-ID", value: after) }
        let response = try await http.execute(request, timeout: .seconds(3600))
        guard response.status == .ok else { return }
        self.opened()
        var pending = ""
        for try await buffer in response.body {
            pending += String(buffer: buffer)
            while let newline = pending.firstIndex(of: "\n") {
                let line = pending[..<newline]
                if line.hasPrefix("data: ") { self.receive(String(line.dropFirst(6))) }
                pending = String(pending[pending.index(after: newline)...])
            }
            if self.isStopped { return }
        }
    }
}
