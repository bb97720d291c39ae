import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Postgres
import TestSupport
import Testing

extension PatroniFailoverTests {
    /// Reads from hot standbys on the Patroni cluster (docs/api.md, "Read-your-writes";
    /// docs/operations.md, "Read replicas"): `receiptsd` with `DATABASE_URL` the read-write
    /// multi-host URL and `RECEIPTS_REPLICA_DATABASE_URL` every node (the one that leads serves
    /// no standby reads), through thousands of writes each read back at once with its token,
    /// standbys whose replay is paused, a standby killed and a switchover.
    ///
    /// Nested in `PatroniFailoverTests`, whose `.serialized` covers these tests too: the two
    /// suites never run at once, so no failover there fails these reads over, and no paused
    /// replay here keeps a standby from taking over there (`--filter PatroniFailoverTests` runs
    /// both; `--filter ReplicaReadTests` these alone).
    @Suite(
        "Read replicas under Patroni", .serialized,
        .enabled(if: PatroniCluster.url != nil, "no Patroni cluster: scripts/test.sh starts one (scripts/ha-cluster.sh)"))
    struct ReplicaReadTests {
        // MARK: - The cluster's nodes

        /// A node of the cluster, reached alone (not through the multi-host URL).
        struct Node: Sendable {
            /// Its name in scripts/ha-cluster.sh (`node2`).
            var name: String
            /// `host:port`, as the service names it in `/metrics`.
            var server: String
            var configuration: PostgresConfiguration

            /// The single value `sql` selects, on this node alone.
            func query<Value: PostgresDecodable>(
                _ sql: String, _ parameters: [any PostgresEncodable] = [], as type: Value.Type
            ) async throws -> Value {
                let connection = try await PostgresConnection.connect(to: self.configuration, logger: TestDatabase.logger)
                do {
                    let value = try await connection.query(sql, parameters).scalar(type)
                    await connection.close()
                    return value
                } catch {
                    await connection.close()
                    throw error
                }
            }

            /// Runs `sql` (a function returning `void`, say) on this node alone.
            func run(_ sql: String) async throws {
                let connection = try await PostgresConnection.connect(to: self.configuration, logger: TestDatabase.logger)
                do {
                    _ = try await connection.executeScript(sql)
                    await connection.close()
                } catch {
                    await connection.close()
                    throw error
                }
            }

            var isStandby: Bool {
                get async throws { try await self.query("SELECT pg_is_in_recovery()", as: Bool.self) }
            }
        }

        /// Every node the cluster's URL names; nodeN listens on 55430+N (scripts/ha-cluster/README.md).
        static func nodes() throws -> [Node] {
            let url = try #require(PatroniFailoverTests.clusterURL)
            return try PostgresConfiguration(connectionString: url, connectTimeoutSeconds: 2).eachHost().map { host in
                let port = Int(host.server.split(separator: ":").last ?? "") ?? 0
                return Node(name: "node\(port - 55430)", server: host.server, configuration: host.configuration)
            }
        }

        /// The nodes in recovery now (the streaming replicas).
        static func standbys() async throws -> [Node] {
            var standbys: [Node] = []
            for node in try Self.nodes() {
                if try await node.isStandby { standbys.append(node) }
            }
            return standbys
        }

        /// `patronictl <arguments>` on the harness's cluster (its `patronictl.yml` in the state
        /// directory, `RECEIPTS_HA_DIR` as scripts/ha-cluster.sh reads it); its standard output.
        @discardableResult
        static func patronictl(_ arguments: String...) async throws -> String {
            let stateDirectory = ProcessInfo.processInfo.environment["RECEIPTS_HA_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/var/tmp/receipts-ha"
            return try await TestDatabase.run(
                "/usr/bin/env", arguments: ["patronictl", "-c", stateDirectory + "/patronictl.yml"] + arguments,
                environment: ["PYTHONWARNINGS": "ignore"]
            ).output
        }

        /// `pg_wal_replay_pause()` on `nodes`, then `body`; replay resumes on them afterwards,
        /// whether `body` succeeded or not.
        ///
        /// Patroni is in maintenance mode meanwhile (`patronictl pause`): otherwise its HA loop
        /// resumes a paused replay within a second (Patroni 3.0 on PostgreSQL 14+,
        /// `handle_parameter_change`, for the pause a lowered parameter on the primary causes).
        static func withReplayPaused(on nodes: [Node], _ body: () async throws -> Void) async throws {
            do {
                try await Self.patronictl("pause", "--wait")
                for node in nodes { try await node.run("SELECT pg_wal_replay_pause()") }
                for node in nodes {
                    let paused = try await node.query("SELECT pg_get_wal_replay_pause_state()", as: String.self)
                    try #require(paused != "not paused", "replay paused on \(node.name)")
                }
                try await body()
            } catch {
                await Self.resumeReplay(on: nodes)
                throw error
            }
            await Self.resumeReplay(on: nodes)
        }

        /// Resumes replay on `nodes` and ends Patroni's maintenance mode.
        static func resumeReplay(on nodes: [Node]) async {
            for node in nodes {
                do {
                    try await node.run("SELECT pg_wal_replay_resume()")
                } catch {
                    Issue.record("replay not resumed on \(node.name): \(error)")
                }
            }
            do {
                try await Self.patronictl("resume", "--wait")
            } catch {
                Issue.record("Patroni's maintenance mode not ended: \(error)")
            }
        }

        /// kill -9 the node's postmaster alone (its pid from `postmaster.pid` in the data
        /// directory the node reports): a crash of that PostgreSQL server, which its Patroni,
        /// still running, starts again.
        static func killPostmaster(of node: Node) async throws {
            let dataDirectory = try await node.query("SELECT current_setting('data_directory')", as: String.self)
            let pidFile = try String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8)
            let pid = try #require(pidFile.split(separator: "\n").first.flatMap { pid_t($0.trimmingCharacters(in: .whitespaces)) })
            #expect(Foundation.kill(pid, SIGKILL) == 0, "kill -9 \(pid), \(node.name)'s postmaster")
        }

        // MARK: - The service

        /// The cluster's URL for the database `name` without `target_session_attrs`: every
        /// node, as `RECEIPTS_REPLICA_DATABASE_URL` (the service skips the one that leads).
        static func replicaURL(database name: String) throws -> String {
            let url = try PatroniFailoverTests.url(database: name)
            let parts = url.split(separator: "?", maxSplits: 1)
            let kept = parts.count > 1 ? parts[1].split(separator: "&").filter { !$0.hasPrefix("target_session_attrs=") } : []
            return kept.isEmpty ? String(parts[0]) : "\(parts[0])?\(kept.joined(separator: "&"))"
        }

        /// A new database on the cluster (dropped at the end) and `count` instances of
        /// `receiptsd serve` on it, reading from every node's standby. The cluster is made whole
        /// first: every node running and streaming, replaying, and managed by Patroni (a run
        /// stopped half-way may have left replay paused in maintenance mode).
        static func withServices(
            _ count: Int = 1, environment: [String: String] = [:], _ body: (_ services: [ReceiptsdProcess]) async throws -> Void
        ) async throws {
            try await PatroniFailoverTests.cluster("start")
            if try await PatroniFailoverTests.cluster("status").contains("Maintenance mode: on") {
                for node in try await Self.standbys() { try? await node.run("SELECT pg_wal_replay_resume()") }
                try await Self.patronictl("resume", "--wait")
            }
            let name = TestDatabase.uniqueName("receipts_replica")
            let clusterURL = try #require(PatroniFailoverTests.clusterURL)
            let admin = try await PostgresConnection.connect(to: PostgresConfiguration(connectionString: clusterURL), logger: TestDatabase.logger)
            _ = try await admin.executeScript("CREATE DATABASE \(name)")
            await admin.close()
            // Every standby has the database before the service starts: libpq tries the hosts of
            // the read-write URL in order, and a host that refuses the database once connected
            // (a standby that has not replayed CREATE DATABASE yet) ends the attempt instead of
            // passing it on to the next host.
            for node in try Self.nodes() {
                let replayed = await Self.eventually(within: .seconds(30)) {
                    (try? await node.query("SELECT count(*) = 1 FROM pg_database WHERE datname = $1", [name], as: Bool.self)) == true
                }
                try #require(replayed, "\(node.name) has the database \(name)")
            }
            let settings = [
                "DATABASE_URL": try PatroniFailoverTests.url(database: name),
                "RECEIPTS_REPLICA_DATABASE_URL": try Self.replicaURL(database: name),
                "RECEIPTS_ADMIN_TOKEN": PatroniFailoverTests.adminToken,
                // A standby leaving service, or a read on one failing, is logged as a warning.
                "LOG_LEVEL": "warning",
            ].merging(environment) { $1 }
            var services: [ReceiptsdProcess] = []
            do {
                // One after the other: the first applies the migrations.
                for _ in 0..<count { services.append(try await ReceiptsdProcess.start(arguments: [], environment: settings)) }
                try await body(services)
            } catch {
                for service in services { service.kill() }
                await Self.drop(database: name)
                throw error
            }
            for service in services { service.kill() }
            await Self.drop(database: name)
        }

        /// Drops the database on whichever node leads now.
        static func drop(database name: String) async {
            guard let url = PatroniFailoverTests.clusterURL,
                let cleanup = try? await PostgresConnection.connect(to: PostgresConfiguration(connectionString: url), logger: TestDatabase.logger)
            else { return }
            _ = try? await cleanup.executeScript("DROP DATABASE \(name) WITH (FORCE)")
            await cleanup.close()
        }

        /// An answer: its status (0 when none came), its JSON object, and the headers of
        /// read-your-writes.
        struct Answer {
            var status: Int
            var json: [String: Any] = [:]
            /// `Receipts-Consistency-Token` (a write's).
            var token: String?
            /// `Receipts-Read-Source` (one of the four reads').
            var source: String?
        }

        /// Sends a request, with `token` as `Receipts-Consistency-Token` when given.
        static func send(
            _ method: HTTPMethod, _ url: String, as credential: String, json: String? = nil, token: String? = nil
        ) async -> Answer {
            var request = HTTPClientRequest(url: url)
            request.method = method
            request.headers.add(name: "Authorization", value: "Bearer \(credential)")
            if let token { request.headers.add(name: "Receipts-Consistency-Token", value: token) }
            if let json {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: json))
            }
            do {
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                let body = try await response.body.collect(upTo: 1 << 22)
                let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any]
                return Answer(
                    status: Int(response.status.code), json: object ?? [:],
                    token: response.headers.first(name: "Receipts-Consistency-Token"),
                    source: response.headers.first(name: "Receipts-Read-Source"))
            } catch {
                return Answer(status: 0)
            }
        }

        /// `/metrics` as text ("" when it did not answer).
        static func metrics(of service: ReceiptsdProcess) async -> String {
            guard let response = try? await HTTPClient.shared.execute(HTTPClientRequest(url: service.baseURL + "/metrics"), timeout: .seconds(10)),
                let body = try? await response.body.collect(upTo: 1 << 22)
            else { return "" }
            return String(buffer: body)
        }

        /// The value of the sample `series` (`name{label="value"}`) in `metrics`, if it is there.
        static func sample(_ series: String, in metrics: String) -> Double? {
            for line in metrics.split(separator: "\n") where line.hasPrefix(series + " ") {
                return Double(line.dropFirst(series.count + 1).trimmingCharacters(in: .whitespaces))
            }
            return nil
        }

        /// Whether `condition` holds within `limit`, tried every 20 ms.
        static func eventually(within limit: Duration, _ condition: () async -> Bool) async -> Bool {
            let deadline = ContinuousClock.now + limit
            while ContinuousClock.now < deadline {
                if await condition() { return true }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return false
        }

        // MARK: - What a read must show

        /// A read that must show a write, and how its answer shows it.
        enum Expectation {
            /// `GET` the message: 200 with its id and text (404: stale).
            case message(chat: String, id: String)
            /// The newest page of the main timeline is exactly these ids, oldest first.
            case page(chat: String, newest: [String], viewer: String?)
            /// The newest page of the main timeline (100) holds this id.
            case pageHolding(chat: String, id: String)
            /// The user's unread count in each of these chats is exactly this (absent: 0).
            case unread(user: String, counts: [String: Int])
            /// The user's unread count in the chat is at least this.
            case unreadAtLeast(user: String, chat: String, count: Int)
            /// The message, as its sender sees it, lists `reader` in `readBy`.
            case readBy(chat: String, id: String, sender: String, reader: String)
            /// The chat lists the user among its members.
            case member(chat: String, user: String)

            var path: String {
                switch self {
                case .message(let chat, let id): "/v1/chats/\(chat)/messages/\(id)"
                case .page(let chat, _, let viewer): "/v1/chats/\(chat)/messages?limit=50" + (viewer.map { "&viewer=\($0)" } ?? "")
                case .pageHolding(let chat, _): "/v1/chats/\(chat)/messages?limit=100"
                case .unread(let user, _), .unreadAtLeast(let user, _, _): "/v1/users/\(user)/unread"
                case .readBy(let chat, let id, let sender, _): "/v1/chats/\(chat)/messages/\(id)?viewer=\(sender)"
                case .member(let chat, _): "/v1/chats/\(chat)"
                }
            }

            /// Whether a 200 shows the write (any other answer does not).
            func isShown(in answer: Answer) -> Bool {
                guard answer.status == 200 else { return false }
                let json = answer.json
                func ids(_ key: String) -> [String] {
                    (json[key] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                }
                func unreadCount(in chat: String) -> Int {
                    (json["chats"] as? [[String: Any]] ?? []).first { $0["chatId"] as? String == chat }?["unreadCount"] as? Int ?? 0
                }
                switch self {
                case .message(_, let id):
                    return json["id"] as? String == id && json["text"] as? String == id
                case .page(_, let newest, _):
                    return ids("messages") == newest
                case .pageHolding(_, let id):
                    return ids("messages").contains(id)
                case .unread(_, let counts):
                    return counts.allSatisfy { unreadCount(in: $0.key) == $0.value }
                        && json["total"] as? Int == counts.values.reduce(0, +)
                case .unreadAtLeast(_, let chat, let count):
                    return unreadCount(in: chat) >= count
                case .readBy(_, let id, _, let reader):
                    return json["id"] as? String == id && (json["readBy"] as? [String] ?? []).contains(reader)
                case .member(_, let user):
                    return (json["members"] as? [[String: Any]] ?? []).contains { $0["userId"] as? String == user }
                }
            }

            /// Reads it on `service` with `token`: the answer, and whether it showed the write.
            func read(on service: ReceiptsdProcess, as apiKey: String, token: String) async -> (answer: Answer, shown: Bool) {
                let answer = await ReplicaReadTests.send(.GET, service.baseURL + self.path, as: apiKey, token: token)
                return (answer, self.isShown(in: answer))
            }
        }

        /// What reads answered: statuses, sources, and the answers that did not show what
        /// they had to (a 200 without it, or a 404), the first few described.
        struct ReadTally: Sendable {
            var statuses: [Int: Int] = [:]
            var sources: [String: Int] = [:]
            var stale = 0
            var examples: [String] = []

            var count: Int { self.statuses.values.reduce(0, +) }
            var fromReplica: Int { self.sources["replica", default: 0] }
            var fromPrimary: Int { self.sources["primary", default: 0] }

            mutating func record(_ answer: Answer, shown: Bool, what: @autoclosure () -> String) {
                self.statuses[answer.status, default: 0] += 1
                if let source = answer.source { self.sources[source, default: 0] += 1 }
                if !shown, answer.status == 200 || answer.status == 404 {
                    self.stale += 1
                    if self.examples.count < 10 {
                        self.examples.append("\(what()): \(answer.status) from \(answer.source ?? "?"), \(answer.json)")
                    }
                }
            }

            mutating func add(_ other: ReadTally) {
                self.statuses.merge(other.statuses, uniquingKeysWith: +)
                self.sources.merge(other.sources, uniquingKeysWith: +)
                self.stale += other.stale
                self.examples += other.examples.prefix(max(0, 10 - self.examples.count))
            }

            var summary: String {
                let replica = self.count == 0 ? 0 : 100 * self.fromReplica / self.count
                return "\(self.count) reads: replica \(self.fromReplica) (\(replica) %), primary \(self.fromPrimary); "
                    + "statuses \(self.statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))"
            }
        }

        // MARK: - Randomized read-your-writes

        /// One tenant's chats as its writes so far leave them: who joined, the messages in
        /// order, what each member has read.
        struct Chats {
            struct Chat {
                var joined: [String] = []
                var messages: [(id: String, sender: String)] = []
                var read: [String: Set<String>] = [:]
            }

            /// Members of every chat from its start (the ones who send and read).
            static let members = ["u0", "u1", "u2", "u3"]
            static let names = ["c0", "c1", "c2"]
            var chats: [String: Chat] = Dictionary(uniqueKeysWithValues: Self.names.map { ($0, Chat()) })

            /// Messages in `chat` from others that `user` has not read.
            func unreadCount(of user: String, in chat: String) -> Int {
                guard let chat = self.chats[chat] else { return 0 }
                let read = chat.read[user, default: []]
                return chat.messages.count(where: { $0.sender != user && !read.contains($0.id) })
            }

            func unreadCounts(of user: String) -> [String: Int] {
                Dictionary(uniqueKeysWithValues: Self.names.map { ($0, self.unreadCount(of: user, in: $0)) })
            }

            /// `user` read these messages (their own are skipped, as the service does).
            mutating func markRead(_ ids: some Sequence<String>, in chat: String, by user: String) {
                let senders = Dictionary(self.chats[chat]!.messages.map { ($0.id, $0.sender) }) { first, _ in first }
                for id in ids where senders[id] != user { self.chats[chat]!.read[user, default: []].insert(id) }
            }
        }

        /// A tenant with the group chats c0, c1 and c2 of u0…u3, made on `service`; its API key.
        static func tenantWithChats(on service: ReceiptsdProcess) async throws -> String {
            let created = await Self.send(.POST, service.baseURL + "/admin/v1/tenants", as: PatroniFailoverTests.adminToken, json: #"{"name":"replicas"}"#)
            let apiKey = try #require(created.json["apiKey"] as? String)
            for chat in Chats.names {
                let members = Chats.members.map { "\"\($0)\"" }.joined(separator: ",")
                let answer = await Self.send(.PUT, service.baseURL + "/v1/chats/\(chat)", as: apiKey, json: #"{"kind":"group","members":[\#(members)]}"#)
                #expect(answer.status == 201)
            }
            return apiKey
        }

        /// `iterations` random writes in the tenant's chats through `writer`, each read back at
        /// once with its token on one of `readers` (by chance): a message sent (in the page, or
        /// shown, or counted unread for another member), messages marked read (the reader's
        /// unread counts, or `readBy` as the sender sees it), a member added (in the chat).
        static func exercise(
            _ iterations: Int, tenant: Int, apiKey: String, writer: ReceiptsdProcess, readers: [ReceiptsdProcess]
        ) async -> (tally: ReadTally, byReader: [Int: ReadTally]) {
            var model = Chats()
            var tally = ReadTally()
            var byReader: [Int: ReadTally] = [:]
            for iteration in 0..<iterations {
                let chat = Chats.names.randomElement()!
                let messages = model.chats[chat]!.messages
                let user = Chats.members.randomElement()!
                var roll = Int.random(in: 0..<100)
                // Marking needs messages; a chat keeps at most 20 who joined later.
                if messages.isEmpty && roll >= 40 || roll >= 90 && model.chats[chat]!.joined.count >= 20 { roll = 0 }
                let written: Answer
                let expectation: Expectation
                switch roll {
                case 0..<40:
                    let id = "t\(tenant)m\(iteration)"
                    written = await Self.send(
                        .POST, writer.baseURL + "/v1/chats/\(chat)/messages", as: apiKey, json: #"{"id":"\#(id)","senderId":"\#(user)","text":"\#(id)"}"#)
                    #expect(written.status == 201, "send: \(written.status) \(written.json)")
                    model.chats[chat]!.messages.append((id, user))
                    let others = Chats.members.filter { $0 != user }
                    switch Int.random(in: 0..<3) {
                    case 0: expectation = .message(chat: chat, id: id)
                    case 1:
                        let viewers: [String?] = Chats.members + [nil]
                        expectation = .page(chat: chat, newest: model.chats[chat]!.messages.suffix(50).map(\.id), viewer: viewers.randomElement()!)
                    default:
                        let other = others.randomElement()!
                        expectation = .unread(user: other, counts: model.unreadCounts(of: other))
                    }
                case 40..<75:
                    let target = messages[max(0, messages.count - Int.random(in: 1...8))...].randomElement()!
                    written = await Self.send(.POST, writer.baseURL + "/v1/chats/\(chat)/read", as: apiKey, json: #"{"userId":"\#(user)","upTo":"\#(target.id)"}"#)
                    #expect(written.status == 200, "read up to: \(written.status) \(written.json)")
                    let index = messages.firstIndex { $0.id == target.id }!
                    model.markRead(messages[...index].map(\.id), in: chat, by: user)
                    if target.sender != user, Bool.random() {
                        expectation = .readBy(chat: chat, id: target.id, sender: target.sender, reader: user)
                    } else {
                        expectation = .unread(user: user, counts: model.unreadCounts(of: user))
                    }
                case 75..<90:
                    let ids = (0..<Int.random(in: 1...3)).map { _ in messages.randomElement()!.id }
                    let list = Set(ids).map { "\"\($0)\"" }.joined(separator: ",")
                    written = await Self.send(.POST, writer.baseURL + "/v1/chats/\(chat)/read", as: apiKey, json: #"{"userId":"\#(user)","messageIds":[\#(list)]}"#)
                    #expect(written.status == 200, "read ids: \(written.status) \(written.json)")
                    model.markRead(ids, in: chat, by: user)
                    expectation = .unread(user: user, counts: model.unreadCounts(of: user))
                default:
                    let joining = "x\(iteration)"
                    written = await Self.send(.POST, writer.baseURL + "/v1/chats/\(chat)/members", as: apiKey, json: #"{"userId":"\#(joining)"}"#)
                    #expect((200..<300).contains(written.status), "join: \(written.status) \(written.json)")
                    model.chats[chat]!.joined.append(joining)
                    expectation = .member(chat: chat, user: joining)
                }
                guard let token = written.token else {
                    Issue.record("a write answered \(written.status) without Receipts-Consistency-Token")
                    continue
                }
                let reader = Int.random(in: 0..<readers.count)
                let (answer, shown) = await expectation.read(on: readers[reader], as: apiKey, token: token)
                let what = "tenant \(tenant) #\(iteration): \(expectation.path) (instance \(reader))"
                tally.record(answer, shown: shown, what: what)
                byReader[reader, default: ReadTally()].record(answer, shown: shown, what: what)
            }
            return (tally, byReader)
        }

        @Test("randomized read-your-writes: every write read back at once with its token, on the instance that wrote or another, shows it; most answers come from standbys")
        func randomizedReadYourWrites() async throws {
            try await Self.withServices(2) { services in
                let writer = services[0]
                let tenants = 4
                let iterations = 700
                var apiKeys: [String] = []
                for _ in 0..<tenants { apiKeys.append(try await Self.tenantWithChats(on: writer)) }
                // The other instance learns of a new tenant within a second.
                for apiKey in apiKeys {
                    let known = await Self.eventually(within: .seconds(10)) {
                        await Self.send(.GET, services[1].baseURL + "/v1/chats/c0", as: apiKey).status == 200
                    }
                    #expect(known, "the second instance knows the tenant")
                }

                let started = ContinuousClock.now
                let results = await withTaskGroup(of: (tally: ReadTally, byReader: [Int: ReadTally]).self) { group in
                    for (tenant, apiKey) in apiKeys.enumerated() {
                        group.addTask { await Self.exercise(iterations, tenant: tenant, apiKey: apiKey, writer: writer, readers: services) }
                    }
                    return await group.reduce(into: [(tally: ReadTally, byReader: [Int: ReadTally])]()) { $0.append($1) }
                }
                var tally = ReadTally()
                var byReader: [Int: ReadTally] = [:]
                for result in results {
                    tally.add(result.tally)
                    for (reader, part) in result.byReader { byReader[reader, default: ReadTally()].add(part) }
                }
                print("read-your-writes: \(tenants) tenants × \(iterations) writes, each read back with its token, in \(ContinuousClock.now - started): \(tally.summary)")
                print("  on the instance that wrote: \(byReader[0]?.summary ?? "none"); on the other: \(byReader[1]?.summary ?? "none")")
                #expect(tally.count == tenants * iterations)
                #expect(tally.statuses == [200: tally.count], "every read answered 200")
                #expect(tally.stale == 0, "answers that did not show their write: \(tally.stale), e.g. \(tally.examples)")
                #expect(tally.sources.values.reduce(0, +) == tally.count, "every answer says where it came from")
                #expect(tally.fromReplica * 2 > tally.count, "more than half the reads came from standbys: \(tally.summary)")

                // /metrics: reads by source, and every node named with its lag; the one that
                // leads serves nothing.
                let nodes = try Self.nodes()
                var isStandby: [String: Bool] = [:]
                for node in nodes { isStandby[node.server] = try await node.isStandby }
                for (index, service) in services.enumerated() {
                    let metrics = await Self.metrics(of: service)
                    let replicaReads = Self.sample(#"receipts_reads_total{source="replica"}"#, in: metrics) ?? 0
                    #expect(replicaReads > 0, "instance \(index): receipts_reads_total{source=\"replica\"} \(replicaReads)")
                    for node in nodes {
                        let lag = #"receipts_replica_lag_seconds{server="\#(node.server)"}"#
                        #expect(Self.sample(lag, in: metrics) != nil, "instance \(index): no \(lag) in /metrics")
                        let usable = Self.sample(#"receipts_replica_usable{server="\#(node.server)"}"#, in: metrics)
                        #expect(usable == (isStandby[node.server] == true ? 1 : 0), "instance \(index): \(node.name) usable \(usable.map { "\($0)" } ?? "absent")")
                    }
                }
            }
        }

        // MARK: - Replay paused

        /// A writer and readers' shared record: the newest message the writer had acknowledged
        /// with its token, what the writes answered, the test's phase, and what the reads
        /// answered in each phase.
        final class Progress: Sendable {
            enum Phase: String, Sendable, CaseIterable {
                case before = "before"
                case standbyDown = "a standby killed"
                case switchover = "switchover"
                case after = "after"
            }

            /// A message acknowledged, the number acknowledged with it, and its write's token.
            struct Written: Sendable {
                var id: String
                var count: Int
                var token: String
            }

            private struct State: Sendable {
                var phase = Phase.before
                var isStopped = false
                var newest: Written?
                var acknowledged = 0
                var writeStatuses: [Int: Int] = [:]
                var untokened = 0
                var reads: [Phase: ReadTally] = [:]
            }

            private let state = NIOLockedValueBox(State())

            var phase: Phase { self.state.withLockedValue { $0.phase } }
            var isStopped: Bool { self.state.withLockedValue { $0.isStopped } }
            var newest: Written? { self.state.withLockedValue { $0.newest } }
            var acknowledged: Int { self.state.withLockedValue { $0.acknowledged } }
            var writeStatuses: [Int: Int] { self.state.withLockedValue { $0.writeStatuses } }
            var untokened: Int { self.state.withLockedValue { $0.untokened } }
            var reads: [Phase: ReadTally] { self.state.withLockedValue { $0.reads } }

            func enter(_ phase: Phase) { self.state.withLockedValue { $0.phase = phase } }
            func stop() { self.state.withLockedValue { $0.isStopped = true } }

            /// Records a send's answer; an acknowledged one with a token becomes the newest
            /// (without one, the newest stays: its token still binds).
            func wrote(_ id: String, _ answer: Answer) {
                self.state.withLockedValue { state in
                    state.writeStatuses[answer.status, default: 0] += 1
                    guard answer.status == 200 || answer.status == 201 else { return }
                    state.acknowledged += 1
                    if let token = answer.token {
                        state.newest = Written(id: id, count: state.acknowledged, token: token)
                    } else {
                        state.untokened += 1
                    }
                }
            }

            func read(in phase: Phase, _ answer: Answer, shown: Bool, what: @autoclosure () -> String) {
                self.state.withLockedValue { $0.reads[phase, default: ReadTally()].record(answer, shown: shown, what: what()) }
            }
        }

        /// Sends messages `w0`, `w1`… to "g" from a, one at a time, each until it is acknowledged
        /// (201, or 200 for one that had committed although its answer was lost: the same id
        /// again is idempotent), `pause` apart, until `progress` stops.
        static func writeMessages(to service: ReceiptsdProcess, apiKey: String, progress: Progress, pause: Duration = .zero) async {
            var index = 0
            while !progress.isStopped, !Task.isCancelled {
                let id = "w\(index)"
                let answer = await Self.send(.POST, service.baseURL + "/v1/chats/g/messages", as: apiKey, json: #"{"id":"\#(id)","senderId":"a","text":"\#(id)"}"#)
                progress.wrote(id, answer)
                if answer.status == 200 || answer.status == 201 {
                    index += 1
                    if pause > .zero { try? await Task.sleep(for: pause) }
                } else {
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
        }

        @Test("replay paused on every standby: a read with a newer token is still fresh (the primary answers it), and reads without one leave the standbys once they lag past RECEIPTS_REPLICA_MAX_LAG_MS")
        func replayPaused() async throws {
            try await Self.withServices(environment: ["RECEIPTS_REPLICA_MAX_LAG_MS": "500"]) { services in
                let service = services[0]
                let apiKey = try await PatroniFailoverTests.tenant(on: service)
                // The chat itself, with the tenant's key: a read about no user, bound by no recent write.
                func untokenedRead() async -> Answer { await Self.send(.GET, service.baseURL + "/v1/chats/g", as: apiKey) }
                let fromStandby = await Self.eventually(within: .seconds(10)) { await untokenedRead().source == "replica" }
                #expect(fromStandby, "before the pause, reads without a token come from standbys")
                let standbys = try await Self.standbys()
                try #require(!standbys.isEmpty)

                try await Self.withReplayPaused(on: standbys) {
                    let pausedAt = ContinuousClock.now
                    let sent = await Self.send(.POST, service.baseURL + "/v1/chats/g/messages", as: apiKey, json: #"{"id":"p0","senderId":"a","text":"p0"}"#)
                    #expect(sent.status == 201)
                    let token = try #require(sent.token)
                    let (shown, isShown) = await Expectation.message(chat: "g", id: "p0").read(on: service, as: apiKey, token: token)
                    #expect(isShown, "a read with the write's token shows it: \(shown.status) \(shown.json)")
                    #expect(shown.source == "primary", "no standby replays past it: the primary answers, after the wait")

                    // Writes go on, so that the primary moves away from the paused standbys.
                    let progress = Progress()
                    async let writing: Void = Self.writeMessages(to: service, apiKey: apiKey, progress: progress, pause: .milliseconds(20))
                    var leftStandbysAfter: Duration?
                    var afterwards = ReadTally()
                    var metrics = ""
                    while leftStandbysAfter == nil, ContinuousClock.now < pausedAt + .seconds(15) {
                        let answer = await untokenedRead()
                        #expect(answer.status == 200)
                        if answer.source == "primary" {
                            leftStandbysAfter = .now - pausedAt
                        } else {
                            try? await Task.sleep(for: .milliseconds(20))
                        }
                    }
                    if leftStandbysAfter != nil {
                        // From then on the primary answers every read, with a token or without.
                        for _ in 0..<40 {
                            let answer = await untokenedRead()
                            afterwards.record(answer, shown: answer.status == 200, what: "GET /v1/chats/g without a token")
                            if let newest = progress.newest {
                                let expectation = Expectation.message(chat: "g", id: newest.id)
                                let (answer, shown) = await expectation.read(on: service, as: apiKey, token: newest.token)
                                afterwards.record(answer, shown: shown, what: "\(expectation.path) with its token")
                            }
                            try? await Task.sleep(for: .milliseconds(25))
                        }
                        metrics = await Self.metrics(of: service)
                    }
                    progress.stop()
                    await writing

                    let leftAfter = try #require(leftStandbysAfter, "reads without a token still came from standbys whose replay was paused 15 s before")
                    print("replay paused: reads without a token went to the primary \(leftAfter) after the pause (RECEIPTS_REPLICA_MAX_LAG_MS 500); then \(afterwards.summary); writes meanwhile \(progress.writeStatuses)")
                    #expect(afterwards.fromPrimary == afterwards.count, "every read from the primary once the standbys lag: \(afterwards.summary)")
                    #expect(afterwards.statuses == [200: afterwards.count])
                    #expect(afterwards.stale == 0, "\(afterwards.examples)")
                    for standby in standbys {
                        let usable = Self.sample(#"receipts_replica_usable{server="\#(standby.server)"}"#, in: metrics)
                        #expect(usable == 0, "\(standby.name), paused: receipts_replica_usable \(usable.map { "\($0)" } ?? "absent")")
                    }
                    let waited = Self.sample(#"receipts_replica_waits_total{served_by="primary"}"#, in: metrics) ?? 0
                    #expect(waited >= 1, "the read with the newer token waited for a standby, then went to the primary")
                }
                // Replay resumed: the standbys catch up and serve reads without a token again.
                let back = await Self.eventually(within: .seconds(15)) { await untokenedRead().source == "replica" }
                #expect(back, "once replay resumes, reads without a token come from standbys again")
            }
        }

        // MARK: - A standby killed, and a switchover

        /// Reads back the newest message the writer acknowledged, with its write's token, until
        /// `progress` stops: by turns the message itself, a page holding it, and b's unread
        /// count of "g" (b reads nothing: at least as many as were acknowledged). Each answer is
        /// recorded under the phase its read began in.
        static func readBack(on service: ReceiptsdProcess, apiKey: String, progress: Progress) async {
            var turn = 0
            while !progress.isStopped, !Task.isCancelled {
                guard let newest = progress.newest else {
                    try? await Task.sleep(for: .milliseconds(10))
                    continue
                }
                let phase = progress.phase
                let expectation: Expectation =
                    switch turn % 3 {
                    case 0: .message(chat: "g", id: newest.id)
                    case 1: .pageHolding(chat: "g", id: newest.id)
                    default: .unreadAtLeast(user: "b", chat: "g", count: newest.count)
                    }
                turn += 1
                let (answer, shown) = await expectation.read(on: service, as: apiKey, token: newest.token)
                progress.read(in: phase, answer, shown: shown, what: "\(phase.rawValue): \(expectation.path) after \(newest.id)")
            }
        }

        @Test("a standby killed, then a switchover, under a writer and a reader with tokens: every read that answers shows the write, no read fails while a standby is down, 503 only while the primary changes")
        func standbyKilledAndSwitchover() async throws {
            try await Self.withServices { services in
                let service = services[0]
                let apiKey = try await PatroniFailoverTests.tenant(on: service)
                let progress = Progress()
                async let writing: Void = Self.writeMessages(to: service, apiKey: apiKey, progress: progress)
                async let reading: Void = Self.readBack(on: service, apiKey: apiKey, progress: progress)
                var killed: Node?
                do {
                    try await Task.sleep(for: .seconds(2))
                    let standby = try #require(try await Self.standbys().first)
                    killed = standby
                    progress.enter(.standbyDown)
                    try await Self.killPostmaster(of: standby)
                    // Patroni starts it again; reads go on meanwhile.
                    try await Task.sleep(for: .seconds(2))
                    try await PatroniFailoverTests.cluster("revive", standby.name)
                    progress.enter(.switchover)
                    let leader = try await PatroniFailoverTests.cluster("switchover")
                    print("switchover: \(leader.trimmingCharacters(in: .whitespacesAndNewlines)) leads")
                    // The primary has changed once a write through the service succeeds again.
                    let acknowledged = progress.acknowledged
                    let wrote = await Self.eventually(within: .seconds(60)) { progress.acknowledged > acknowledged }
                    #expect(wrote, "writes go on after the switchover")
                    progress.enter(.after)
                    try await Task.sleep(for: .seconds(2))
                } catch {
                    progress.stop()
                    await writing
                    await reading
                    if let killed { _ = try? await PatroniFailoverTests.cluster("revive", killed.name) }
                    throw error
                }
                progress.stop()
                await writing
                await reading

                let reads = progress.reads
                for phase in Progress.Phase.allCases {
                    print("standby killed, switchover: \(phase.rawValue): \(reads[phase]?.summary ?? "no reads")")
                }
                print("  writes: \(progress.writeStatuses.sorted { $0.key < $1.key }), \(progress.untokened) acknowledged without a token")
                for phase in Progress.Phase.allCases {
                    let tally = try #require(reads[phase], "reads in phase \(phase.rawValue)")
                    #expect(tally.stale == 0, "\(phase.rawValue): answers that did not show their write: \(tally.stale), e.g. \(tally.examples)")
                    let allowed: Set<Int> = phase == .switchover ? [200, 503] : [200]
                    #expect(Set(tally.statuses.keys).isSubset(of: allowed), "\(phase.rawValue): reads answered \(tally.statuses)")
                }
                #expect(reads[.before]?.fromReplica ?? 0 > 0, "standbys serve reads before the kill")
                #expect(reads[.standbyDown]?.fromReplica ?? 0 > 0, "the other standby serves reads while one is down")
                #expect(Set(progress.writeStatuses.keys).isSubset(of: [200, 201, 503, 0]), "writes answered \(progress.writeStatuses)")
            }
        }
    }
}
