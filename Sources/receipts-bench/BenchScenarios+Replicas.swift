import Foundation
import Logging
import NIOHTTP1
import Postgres

extension BenchScenarios {
    // MARK: - Read replicas

    /// Reads served by standbys with read-your-writes (docs/operations.md, "Read replicas";
    /// docs/api.md, "Read-your-writes: the consistency token"). A second service runs on the
    /// same database with `RECEIPTS_REPLICA_DATABASE_URL` naming the standbys (`standbysURL`),
    /// beside the bench's own, which has none. Once the standbys serve that service's reads
    /// (the new database replicated there), three figures:
    /// - `mixedLoadWithTokens`: the share of the four reads a standby may serve that the
    ///   standbys did serve, while clients write and read back with their tokens (≥ 90 %),
    ///   every read checked to show the write before it;
    /// - `tokenLatency`: what a read with a token costs from a caught-up standby over the same
    ///   read on the service without standbys (p50 ≤ +0.2 ms);
    /// - `postgresCPUPerRead`: the primary's PostgreSQL CPU per read under a read-only load,
    ///   without standbys and with them, and what the standbys spend instead.
    ///
    /// The two services hear each other as instances of one deployment do, so each sends a
    /// NOTIFY after its writes to wake the other (docs/operations.md, "Several instances").
    /// Skipped (with a line saying so) when there are no standbys to name, or when the bench
    /// was given a service (`--url`) instead of starting one.
    func replicas(into results: inout BenchResults) async throws {
        guard let standbysURL, let serviceLaunch else {
            print(
                self.serviceLaunch == nil
                    ? "replicas: skipped: it starts a second receiptsd, which --url does not allow"
                    : "replicas: skipped: no --replica-database-url, and --database-url names a single host")
            return
        }
        let clients = min(16, self.concurrency)
        try await self.setUpReplicaChats(clients: clients)
        let replicaURL = try BenchDatabase.url(standbysURL, database: self.database.name)
        let service = try await BenchService.start(
            executable: serviceLaunch.executable, databaseURL: self.database.url, poolSize: serviceLaunch.poolSize,
            environment: ["RECEIPTS_REPLICA_DATABASE_URL": replicaURL])
        defer { service.stop() }
        let withReplicas = try BenchClient(baseURL: service.baseURL)
        do {
            try await self.waitForStandbys(withReplicas)
            try await self.mixedLoadWithTokens(withReplicas, clients: clients, into: &results)
            try await self.tokenLatency(withReplicas, into: &results)
            try await self.postgresCPUPerRead(
                withReplicas, servicePID: service.process?.processIdentifier, replicaURL: replicaURL, clients: clients, into: &results)
        } catch {
            await withReplicas.shutdown()
            throw error
        }
        await withReplicas.shutdown()
    }

    /// The standbys' URL when the bench is not told one: `serverURL` without its
    /// `target_session_attrs`, when it names several hosts (a cluster; the primary among them
    /// serves no reads). Nil for a single host or libpq's keyword form.
    static func standbysURL(of serverURL: String) -> String? {
        guard let scheme = serverURL.range(of: "://") else { return nil }
        let rest = serverURL[scheme.upperBound...]
        let hostsEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let hosts = rest[..<hostsEnd].split(separator: "@").last ?? ""
        guard hosts.contains(",") else { return nil }
        guard let queryStart = rest[hostsEnd...].firstIndex(of: "?") else { return serverURL }
        let kept = rest[rest.index(after: queryStart)...].split(separator: "&").filter { !$0.hasPrefix("target_session_attrs=") }
        return String(serverURL[..<queryStart]) + (kept.isEmpty ? "" : "?" + kept.joined(separator: "&"))
    }

    /// `Receipts-Consistency-Token` and `Receipts-Read-Source` (docs/api.md).
    private static let tokenHeader = "Receipts-Consistency-Token"
    private static let sourceHeader = "Receipts-Read-Source"

    /// Per client n: the direct chat "replica-n" of "ra-n" (who sends) and "rb-n" (who reads);
    /// and "replica-latency" of "rl-friend" (who sends) and "rl-user" (whose unread counts the
    /// latency figure reads). Straight through the SQL functions, on the primary.
    private func setUpReplicaChats(clients: Int) async throws {
        try await self.database.pool.query(
            "SELECT receipts.put_chat($1, 'replica-' || g, 'direct', ARRAY['ra-' || g, 'rb-' || g]) FROM generate_series(0, $2::int - 1) AS g",
            [self.tenant.id, clients])
        try await self.database.pool.query(
            "SELECT receipts.put_chat($1, 'replica-latency', 'direct', ARRAY['rl-friend', 'rl-user'])", [self.tenant.id])
        try await self.settleDatabase()
    }

    /// Until the service with standbys answers a read from one: the standbys have the new
    /// database (created on the primary moments ago) and the service found them well.
    private func waitForStandbys(_ withReplicas: BenchClient) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        var last = "no answer"
        while ContinuousClock.now < deadline {
            let answer = try await withReplicas.exchange(.GET, "/v1/users/rb-0/unread", as: self.tenant.apiKey)
            if answer.status == 200, answer.headers.first(name: Self.sourceHeader) == "replica" { return }
            last = "\(answer.status), \(Self.sourceHeader): \(answer.headers.first(name: Self.sourceHeader) ?? "none")"
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BenchFailure("replicas: no standby answered a read within 60 s (last answer \(last)); is the cluster streaming?")
    }

    // MARK: Share of the reads on standbys

    /// The four reads a standby may serve, as the replicas scenario makes them.
    private enum ReplicaRead: String, CaseIterable, Sendable {
        case unread = "unread counts"
        case chat
        case page = "message page"
        case message

        /// The path of this read about chat `chat`, its reader `reader` and its newest message `newest`.
        func path(chat: String, reader: String, newest: String) -> String {
            switch self {
            case .unread: "/v1/users/\(reader)/unread"
            case .chat: "/v1/chats/\(chat)"
            case .page: "/v1/chats/\(chat)/messages?limit=20"
            case .message: "/v1/chats/\(chat)/messages/\(newest)"
            }
        }

        /// What is wrong with `answer` if it does not show the chat as the client left it:
        /// `newest` the newest message, `unread` the reader's unread count, `read` whether the
        /// reader has read `newest`. Nil when it does. The chat itself shows nothing the
        /// client's writes change: only that it is there.
        func staleness(of answer: BenchClient.Answer, chat: String, reader: String, newest: String, unread: Int, read: Bool) -> String? {
            let json = (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:]
            let shown: String
            switch self {
            case .unread:
                let listed = (json["chats"] as? [[String: Any]] ?? []).first { $0["chatId"] as? String == chat }
                let count = listed?["unreadCount"] as? Int ?? 0
                if answer.status == 200, count == unread { return nil }
                shown = "unread \(count), not \(unread)"
            case .chat:
                if answer.status == 200, json["id"] as? String == chat { return nil }
                shown = "no chat"
            case .page:
                let last = (json["messages"] as? [[String: Any]])?.last
                let readBy = last?["readBy"] as? [String] ?? []
                if answer.status == 200, last?["id"] as? String == newest, readBy.contains(reader) == read { return nil }
                shown = "newest \(last?["id"] as? String ?? "none") read by \(readBy), not \(newest)" + (read ? " read by \(reader)" : "")
            case .message:
                let readBy = json["readBy"] as? [String] ?? []
                if answer.status == 200, readBy.contains(reader) == read { return nil }
                shown = answer.status == 200 ? "read by \(readBy)" + (read ? ", not by \(reader)" : "") : "not found"
            }
            let source = answer.headers.first(name: BenchScenarios.sourceHeader) ?? "no \(BenchScenarios.sourceHeader)"
            return "\(self.path(chat: chat, reader: reader, newest: newest)): \(answer.status), \(shown) (from \(source))"
        }
    }

    /// What the clients of `mixedLoadWithTokens` counted after the warm-up.
    private struct MixedTally: Sendable {
        /// Answers per read and `Receipts-Read-Source` value ("none" when absent).
        var sources: [ReplicaRead: [String: Int]] = [:]
        var writes = 0
        var writesWithoutToken = 0
        var stale = 0
        var firstStale: String?

        static func + (left: MixedTally, right: MixedTally) -> MixedTally {
            var sum = left
            sum.sources.merge(right.sources) { $0.merging($1, uniquingKeysWith: +) }
            sum.writes += right.writes
            sum.writesWithoutToken += right.writesWithoutToken
            sum.stale += right.stale
            sum.firstStale = left.firstStale ?? right.firstStale
            return sum
        }

        var reads: Int { self.sources.values.reduce(0) { $0 + $1.values.reduce(0, +) } }

        func fromStandbys(_ read: ReplicaRead? = nil) -> (count: Int, of: Int) {
            let counts = read.map { [self.sources[$0] ?? [:]] } ?? Array(self.sources.values)
            return (counts.reduce(0) { $0 + ($1["replica"] ?? 0) }, counts.reduce(0) { $0 + $1.values.reduce(0, +) })
        }
    }

    /// `clients` clients at once on the service with standbys, each in its own chat: a write
    /// (in turn: "ra-n" sends a message, "rb-n" marks read up to it), then the four reads
    /// (each kind first in turn), each sending the newest token the client holds and checked
    /// to show that write. For
    /// 10 s at full scale (at least 1 s), after a warm-up of a tenth of that (at least 0.5 s)
    /// that is not counted. A read that does not show its client's write fails the scenario.
    private func mixedLoadWithTokens(_ withReplicas: BenchClient, clients: Int, into results: inout BenchResults) async throws {
        let phase = Duration.milliseconds(Int(max(1, 10 * self.scale) * 1000))
        let warmUpEnd = ContinuousClock.now + max(.milliseconds(500), phase / 10)
        let deadline = warmUpEnd + phase
        let apiKey = self.tenant.apiKey
        async let loops = withThrowingTaskGroup(of: MixedTally.self) { group in
            for index in 0..<clients {
                group.addTask {
                    try await Self.mixedLoop(withReplicas, apiKey: apiKey, index: index, countingFrom: warmUpEnd, until: deadline)
                }
            }
            return try await group.reduce(MixedTally(), +)
        }
        try await Task.sleep(until: warmUpEnd)
        let waitsBefore = try await Self.replicaWaits(withReplicas)
        let tally = try await loops
        let seconds = Double((ContinuousClock.now - warmUpEnd) / .microseconds(1)) / 1_000_000
        let waitsAfter = try await Self.replicaWaits(withReplicas)

        guard tally.stale == 0 else {
            throw BenchFailure("replicas: \(tally.stale) of \(tally.reads) reads did not show the write whose token they sent; the first: \(tally.firstStale ?? "?")")
        }
        let all = tally.fromStandbys()
        let byRead = ReplicaRead.allCases.map { read in
            let (count, of) = tally.fromStandbys(read)
            return read.rawValue + String(format: " %.1f %%", 100 * Double(count) / Double(max(1, of)))
        }
        let waitedOnStandby = waitsAfter.replica - waitsBefore.replica
        let waitedToPrimary = waitsAfter.primary - waitsBefore.primary
        let others = (tally.sources.values.reduce(into: [String: Int]()) { $0.merge($1, uniquingKeysWith: +) })
            .filter { $0.key != "replica" && $0.key != "primary" }
        results.add(
            "reads served by standbys, mixed load with tokens", unit: "%", value: 100 * Double(all.count) / Double(max(1, all.of)),
            target: "≥ 90",
            note: String(format: "%d clients, a write then the four reads; %.0f reads/s, %.0f writes/s; ", clients,
                         Double(tally.reads) / seconds, Double(tally.writes) / seconds)
                + byRead.joined(separator: ", ")
                + "; waited for a standby \(waitedOnStandby + waitedToPrimary) (then the primary \(waitedToPrimary))"
                + "; 0 stale of \(tally.reads)"
                + (tally.writesWithoutToken > 0 ? "; \(tally.writesWithoutToken) writes without a token" : "")
                + (others.isEmpty ? "" : "; other sources \(others)"))
    }

    /// One client of `mixedLoadWithTokens`: chat "replica-<index>" until `deadline`, counting
    /// from `countingFrom`.
    private static func mixedLoop(
        _ client: BenchClient, apiKey: String, index: Int, countingFrom start: ContinuousClock.Instant, until deadline: ContinuousClock.Instant
    ) async throws -> MixedTally {
        let chat = "replica-\(index)"
        let (sender, reader) = ("ra-\(index)", "rb-\(index)")
        var tally = MixedTally()
        var token: String?
        var newest: String?
        var unread = 0
        var read = false
        var sent = 0
        var writes = 0
        while ContinuousClock.now < deadline {
            let counting = ContinuousClock.now >= start
            let write: BenchClient.Answer
            if let unreadNewest = newest, !read {
                write = try await client.exchange(.POST, "/v1/chats/\(chat)/read", as: apiKey, body: ["userId": reader, "upTo": unreadNewest])
                (unread, read) = (0, true)
            } else {
                sent += 1
                let id = "replica-\(index)-\(sent)"
                write = try await client.exchange(.POST, "/v1/chats/\(chat)/messages", as: apiKey,
                                                  body: ["id": id, "senderId": sender, "text": "replica"])
                (newest, unread, read) = (id, unread + 1, false)
            }
            guard (200..<300).contains(write.status) else {
                throw BenchFailure("replicas: a write in \(chat): \(write.status): \(String(decoding: write.body.prefix(300), as: UTF8.self))")
            }
            if let written = write.headers.first(name: Self.tokenHeader) { token = written } else if counting { tally.writesWithoutToken += 1 }
            if counting { tally.writes += 1 }
            let headers = token.map { [(Self.tokenHeader, $0)] } ?? []
            // The first read after a write is the one a standby not there yet makes wait: each
            // kind goes first in turn, so that the shares per kind compare.
            writes += 1
            let kinds = ReplicaRead.allCases
            for kind in kinds[(writes % kinds.count)...] + kinds[..<(writes % kinds.count)] {
                let answer = try await client.exchange(.GET, kind.path(chat: chat, reader: reader, newest: newest!), as: apiKey, headers: headers)
                // A 404 of the message just sent is a stale answer; any other failure is not.
                guard answer.status == 200 || (kind == .message && answer.status == 404) else {
                    throw BenchFailure("replicas: \(kind.path(chat: chat, reader: reader, newest: newest!)): \(answer.status)")
                }
                if let stale = kind.staleness(of: answer, chat: chat, reader: reader, newest: newest!, unread: unread, read: read) {
                    tally.stale += 1
                    tally.firstStale = tally.firstStale ?? stale
                }
                if counting { tally.sources[kind, default: [:]][answer.headers.first(name: Self.sourceHeader) ?? "none", default: 0] += 1 }
            }
        }
        return tally
    }

    /// `receipts_replica_waits_total` of the service's `/metrics`: reads that waited for a
    /// standby to replay their position, by who answered them in the end.
    private static func replicaWaits(_ client: BenchClient) async throws -> (replica: Int, primary: Int) {
        let text = String(decoding: try await client.check(200, .GET, "/metrics", as: nil), as: UTF8.self)
        var waits = (replica: 0, primary: 0)
        for line in text.split(separator: "\n") where line.hasPrefix("receipts_replica_waits_total{") {
            let count = line.split(separator: " ").last.flatMap { Double($0) }.map { Int($0) } ?? 0
            if line.contains("served_by=\"replica\"") { waits.replica += count } else if line.contains("served_by=\"primary\"") { waits.primary += count }
        }
        return waits
    }

    // MARK: Latency of a read with a token

    /// `GET /v1/users/rl-user/unread` with a token, on the service without standbys and on
    /// the one with them, one after the other (in turns, which goes first) `count(1000)`
    /// times (at least 100): ten pairs after each write (rl-friend sends to rl-user), the
    /// first 50 ms after it, so that the standbys have replayed it. Both send the token; the
    /// service with standbys must show the write. Ten writes' pairs first are warm-up.
    private func tokenLatency(_ withReplicas: BenchClient, into results: inout BenchResults) async throws {
        let apiKey = self.tenant.apiKey
        let pairsPerWrite = 10
        let writes = self.count(1000, minimum: 100) / pairsPerWrite
        let path = "/v1/users/rl-user/unread"
        var withoutStandbys: [Double] = []
        var fromStandbys: [Double] = []
        var sources: [String: Int] = [:]
        var unread = try await self.client.expect(200, .GET, path, as: apiKey)["total"] as? Int ?? 0
        for write in 0..<(writes + 10) {
            let sent = try await withReplicas.exchange(.POST, "/v1/chats/replica-latency/messages", as: apiKey,
                                                       body: ["senderId": "rl-friend", "text": "latency"])
            guard sent.status == 201, let token = sent.headers.first(name: Self.tokenHeader) else {
                throw BenchFailure("replicas: the latency figure's send: \(sent.status), token \(sent.headers.first(name: Self.tokenHeader) ?? "none")")
            }
            unread += 1
            try await Task.sleep(for: .milliseconds(50))
            for pair in 0..<pairsPerWrite {
                var timed: [(client: BenchClient, milliseconds: Double, answer: BenchClient.Answer)] = []
                for client in pair.isMultiple(of: 2) ? [self.client, withReplicas] : [withReplicas, self.client] {
                    let start = ContinuousClock.now
                    let answer = try await client.exchange(.GET, path, as: apiKey, headers: [(Self.tokenHeader, token)])
                    timed.append((client, Double((ContinuousClock.now - start) / .microseconds(1)) / 1000, answer))
                }
                for (client, milliseconds, answer) in timed {
                    let total = ((try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any])?["total"] as? Int
                    guard answer.status == 200, total == unread else {
                        throw BenchFailure("replicas: \(path) with a token: \(answer.status), total \(total.map(String.init) ?? "?"), not \(unread) "
                                           + "(from \(answer.headers.first(name: Self.sourceHeader) ?? "?"))")
                    }
                    guard write >= 10 else { continue }
                    if client === withReplicas {
                        fromStandbys.append(milliseconds)
                        sources[answer.headers.first(name: Self.sourceHeader) ?? "none", default: 0] += 1
                    } else {
                        withoutStandbys.append(milliseconds)
                    }
                }
            }
        }
        let share = 100 * Double(sources["replica"] ?? 0) / Double(max(1, fromStandbys.count))
        results.add("unread with a token, service without standbys", latencies: withoutStandbys, target: "",
                    note: "n=\(withoutStandbys.count); the primary answers")
        results.add("unread with a token 50 ms old, service with standbys", latencies: fromStandbys, target: "",
                    note: String(format: "n=%d; %.1f %% from standbys", fromStandbys.count, share))
        let (p50Without, p50From) = (Self.percentile(0.5, of: withoutStandbys), Self.percentile(0.5, of: fromStandbys))
        let (p99Without, p99From) = (Self.percentile(0.99, of: withoutStandbys), Self.percentile(0.99, of: fromStandbys))
        results.add("… added by the standby read: p50 with standbys − without", unit: "ms", value: p50From - p50Without,
                    target: "≤ +0.2",
                    note: String(format: "p50 %.3f − %.3f ms; p99 %.2f − %.2f ms; in pairs, in turns which goes first",
                                 p50From, p50Without, p99From, p99Without))
    }

    // MARK: PostgreSQL CPU per read

    /// A read-only load, the four reads in turn by `clients` clients each in its own chat and
    /// with the token of a send made before, for 5 s at full scale (at least 1 s) after 0.5 s
    /// of warm-up: first on the service without standbys, then on the one with them. Rows:
    /// the CPU time of the primary's PostgreSQL processes per read in each, that of the
    /// standbys' with standbys, and the standbys' share of it. PostgreSQL's processes are
    /// read from /proc (`PostgresServer`), so the cluster must run on this machine; the
    /// figures are skipped otherwise. /proc counts in ticks of 10 ms per process: over the
    /// thousands of reads of a full-scale phase that is a few µs per read.
    private func postgresCPUPerRead(
        _ withReplicas: BenchClient, servicePID: Int32?, replicaURL: String, clients: Int, into results: inout BenchResults
    ) async throws {
        guard let servers = try await self.postgresServers(standbysURL: replicaURL) else {
            print("replicas: PostgreSQL CPU per read skipped: the primary's postmaster is not a process of this machine")
            return
        }
        let apiKey = self.tenant.apiKey
        var reads: [(chat: String, reader: String, newest: String, token: String)] = []
        for index in 0..<clients {
            let id = "replica-cpu-\(index)"
            let sent = try await withReplicas.exchange(.POST, "/v1/chats/replica-\(index)/messages", as: apiKey,
                                                       body: ["id": id, "senderId": "ra-\(index)", "text": "cpu"])
            guard sent.status == 201, let token = sent.headers.first(name: Self.tokenHeader) else {
                throw BenchFailure("replicas: the CPU figure's send: \(sent.status), token \(sent.headers.first(name: Self.tokenHeader) ?? "none")")
            }
            reads.append(("replica-\(index)", "rb-\(index)", id, token))
        }
        try await self.settleDatabase()
        let phase = Duration.milliseconds(Int(max(1, 5 * self.scale) * 1000))
        let without = try await Self.readLoad(self.client, apiKey: apiKey, reads: reads, phase: phase, servers: servers, servicePID: self.servicePID)
        let with = try await Self.readLoad(withReplicas, apiKey: apiKey, reads: reads, phase: phase, servers: servers, servicePID: servicePID)
        guard try await self.primaryPostmaster() == servers.primary.postmaster else {
            throw BenchFailure("replicas: the primary changed during the CPU figures (a switchover or failover?); run again")
        }

        func perRead(_ seconds: Double, _ load: ReadLoad) -> Double { seconds / Double(load.reads) * 1_000_000 }
        let standbys = "\(servers.standbys.count) standbys"
        results.add("primary PostgreSQL CPU µs per read, no replicas", unit: "µs", value: perRead(without.primarySeconds, without), target: "",
                    note: String(format: "%d clients, the four reads; %.0f reads/s; service %.0f µs/read; ",
                                 clients, without.perSecond, perRead(without.serviceSeconds, without))
                        + standbys + String(format: " %.0f µs/read (the other service's checks)", perRead(without.standbySeconds, without)))
        results.add("primary PostgreSQL CPU µs per read, with replicas", unit: "µs", value: perRead(with.primarySeconds, with), target: "",
                    note: String(format: "%.0f reads/s, %.1f %% from standbys; service %.0f µs/read", with.perSecond,
                                 100 * Double(with.fromStandbys) / Double(max(1, with.reads)), perRead(with.serviceSeconds, with)))
        results.add("standbys' PostgreSQL CPU µs per read, with replicas", unit: "µs", value: perRead(with.standbySeconds, with), target: "",
                    note: "\(standbys) together: \(servers.standbys.map(\.name).joined(separator: ", "))")
        results.add("standbys' share of PostgreSQL CPU, with replicas", unit: "%",
                    value: 100 * with.standbySeconds / (with.standbySeconds + with.primarySeconds), target: "",
                    note: String(format: "of %.0f µs/read on all nodes; without replicas %.0f µs/read",
                                 perRead(with.standbySeconds + with.primarySeconds, with),
                                 perRead(without.standbySeconds + without.primarySeconds, without)))
    }

    /// What one phase of `postgresCPUPerRead` measured.
    private struct ReadLoad: Sendable {
        var reads = 0
        var fromStandbys = 0
        var seconds = 0.0
        var primarySeconds = 0.0
        var standbySeconds = 0.0
        var serviceSeconds = 0.0

        var perSecond: Double { Double(self.reads) / self.seconds }
    }

    /// Each of `reads` (a client each) makes the four reads in turn on `client` for 0.5 s of
    /// warm-up, then for `phase` while the CPU times of `servers` and of the service are
    /// measured.
    private static func readLoad(
        _ client: BenchClient, apiKey: String, reads: [(chat: String, reader: String, newest: String, token: String)],
        phase: Duration, servers: (primary: PostgresServer, standbys: [PostgresServer]), servicePID: Int32?
    ) async throws -> ReadLoad {
        let warmUpEnd = ContinuousClock.now + .milliseconds(500)
        let deadline = warmUpEnd + phase
        async let loads = withThrowingTaskGroup(of: ReadLoad.self) { group in
            for read in reads {
                group.addTask {
                    var load = ReadLoad()
                    while ContinuousClock.now < deadline {
                        for kind in ReplicaRead.allCases {
                            let path = kind.path(chat: read.chat, reader: read.reader, newest: read.newest)
                            let answer = try await client.exchange(.GET, path, as: apiKey, headers: [(Self.tokenHeader, read.token)])
                            guard answer.status == 200 else { throw BenchFailure("replicas: \(path): \(answer.status)") }
                            guard ContinuousClock.now >= warmUpEnd else { continue }
                            load.reads += 1
                            if answer.headers.first(name: Self.sourceHeader) == "replica" { load.fromStandbys += 1 }
                        }
                    }
                    return load
                }
            }
            return try await group.reduce(into: ReadLoad()) { sum, load in
                sum.reads += load.reads
                sum.fromStandbys += load.fromStandbys
            }
        }
        try await Task.sleep(until: warmUpEnd)
        let primaryBefore = servers.primary.cpuSeconds()
        let standbysBefore = servers.standbys.map { $0.cpuSeconds() }
        let serviceBefore = CPUTimes.now(servicePID: servicePID)?.service
        var load = try await loads
        load.seconds = Double((ContinuousClock.now - warmUpEnd) / .microseconds(1)) / 1_000_000
        guard let primaryBefore, let primaryAfter = servers.primary.cpuSeconds() else {
            throw BenchFailure("replicas: the primary's postmaster \(servers.primary.postmaster) exited during the CPU figures; run again")
        }
        load.primarySeconds = primaryAfter - primaryBefore
        for (standby, before) in zip(servers.standbys, standbysBefore) {
            guard let before, let after = standby.cpuSeconds() else {
                throw BenchFailure("replicas: the postmaster of \(standby.name) exited during the CPU figures; run again")
            }
            load.standbySeconds += after - before
        }
        load.serviceSeconds = (CPUTimes.now(servicePID: servicePID)?.service).map { $0 - (serviceBefore ?? $0) } ?? 0
        return load
    }

    /// The PostgreSQL servers of the cluster: the primary (the server `database` is on) and
    /// every standby `standbysURL` names that is in recovery; nil when the primary's
    /// postmaster is not a process of this machine. A standby that cannot be reached is left
    /// out (it serves no reads either).
    private func postgresServers(standbysURL: String) async throws -> (primary: PostgresServer, standbys: [PostgresServer])? {
        guard let primaryPID = try await self.primaryPostmaster() else { return nil }
        var primaryName = "the primary"
        var standbys: [PostgresServer] = []
        let logger = Logger(label: "receipts-bench")
        for (server, configuration) in try PostgresConfiguration(connectionString: standbysURL, applicationName: "receipts-bench").eachHost() {
            guard let connection = try? await PostgresConnection.connect(to: configuration, logger: logger) else { continue }
            let isStandby = try? await connection.query("SELECT pg_is_in_recovery()", []).scalar(Bool.self)
            let postmaster = PostgresServer.postmaster(ofSession: connection.backendPID)
            await connection.close()
            guard let isStandby, let postmaster else { continue }
            if isStandby {
                standbys.append(PostgresServer(name: server, postmaster: postmaster))
            } else if postmaster == primaryPID {
                primaryName = server
            }
        }
        return (PostgresServer(name: primaryName, postmaster: primaryPID), standbys)
    }

    /// The process id of the primary's postmaster (the parent of a session's process), nil
    /// when that session is not a process of this machine.
    private func primaryPostmaster() async throws -> Int32? {
        try await self.database.pool.withConnection { PostgresServer.postmaster(ofSession: $0.backendPID) }
    }
}

/// One PostgreSQL server on this machine, by its postmaster's process id.
private struct PostgresServer: Sendable {
    let name: String
    let postmaster: Int32

    /// The postmaster of the server whose session has the process id `backend`
    /// (`PostgresConnection.backendPID`, `pg_backend_pid()`): its parent. Nil when that is no
    /// process of this machine (or one PostgreSQL did not fork).
    static func postmaster(ofSession backend: Int32) -> Int32? {
        guard let parent = self.stat(of: "\(backend)")?.parent, let postmaster = self.stat(of: "\(parent)"),
            let name = try? String(contentsOfFile: "/proc/\(parent)/comm", encoding: .utf8),
            name.hasPrefix("postgres") || name.hasPrefix("postmaster"), postmaster.parent != 0
        else { return nil }
        return parent
    }

    /// Seconds of CPU (user and system) its processes have used: the postmaster's own, those
    /// of the children it has reaped (sessions that ended), and every child still running
    /// (sessions, WAL writer, checkpointer, the standby's startup process and WAL receiver,
    /// autovacuum). Nil when the postmaster is not a process of this machine.
    func cpuSeconds() -> Double? {
        guard let root = Self.stat(of: "\(self.postmaster)") else { return nil }
        var seconds = root.own + root.reaped
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where entry.allSatisfy(\.isNumber) {
            if let child = Self.stat(of: entry), child.parent == self.postmaster { seconds += child.own }
        }
        return seconds
    }

    /// The parent, utime + stime and cutime + cstime of /proc/<process>/stat, in seconds.
    private static func stat(of process: String) -> (parent: Int32, own: Double, reaped: Double)? {
        guard let stat = try? String(contentsOfFile: "/proc/\(process)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After the name: state (field 3), ppid (4), ..., utime (14), stime (15), cutime (16), cstime (17).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 14, let parent = Int32(fields[1]),
            let user = Double(fields[11]), let system = Double(fields[12]),
            let childrenUser = Double(fields[13]), let childrenSystem = Double(fields[14])
        else { return nil }
        let tick = Double(sysconf(Int32(_SC_CLK_TCK)))
        return (parent, (user + system) / tick, (childrenUser + childrenSystem) / tick)
    }
}
