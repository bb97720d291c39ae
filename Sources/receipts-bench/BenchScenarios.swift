import Foundation
import HummingbirdWSClient
import Logging
import NIOConcurrencyHelpers
import NIOHTTP1
import Postgres

/// The measurements. Setup that is not being measured (thousands of messages, a thousand
/// chats) goes straight to the SQL functions; everything measured goes through the service.
struct BenchScenarios {
    let client: BenchClient
    let tenant: (id: String, apiKey: String)
    let database: BenchDatabase
    let scale: Double
    let concurrency: Int
    /// The service's process, when the bench started it (for its memory).
    let servicePID: Int32?
    /// The group sizes of the large-group scenario (`--group-sizes`); nil: `largeGroupSizes` at the run's scale.
    var groupSizes: [Int]? = nil
    /// The numbers of streams of the streams scenario (`--stream-counts`); nil: 1,000 and
    /// 10,000 at the run's scale.
    var streamCounts: [Int]? = nil
    /// The service's admin token, for scenarios that create tenants of their own (fairness).
    var adminToken: String? = nil
    /// The standbys of the server `database` is on, libpq's multi-host form with any database
    /// name (`--replica-database-url`): the replicas scenario points a second service at them.
    var standbysURL: String? = nil
    /// The receiptsd executable and pool size the bench started its service with, for the
    /// replicas scenario's second service; nil when the bench was given a service (`--url`).
    var serviceLaunch: (executable: String, poolSize: Int?)? = nil

    func count(_ full: Int, minimum: Int = 10) -> Int { max(minimum, Int(Double(full) * self.scale)) }

    /// The scenarios, by the names `--only` takes.
    enum Scenario: String, CaseIterable {
        case idle, load, fanout, http, send, single, batches, raw, readall, unread
        case largeGroup = "large-group"
        case deleteMessage = "delete-message"
        case deleteChat = "delete-chat"
        case erase
        case webhook
        case markLatency = "mark-latency"
        case streams
        case streamsSSE = "streams-sse"
        case threads
        case fairness
        case streamFairness = "fairness-streams"
        case tenants
        case replicas
        case importHistory = "import"
    }

    /// Names of the rows that rows of later scenarios divide by (`BenchResults.value(of:)`):
    /// one spelling for the row and its readers.
    enum Figure {
        static let http = "HTTP alone: GET /healthz (no database)"
        static let sends = "send throughput"
        static let singleMarkReads = "mark-read, one message per request"
        static let batches = "mark-read in batches of 100"
    }

    func run(_ scenarios: Set<Scenario>, into results: inout BenchResults) async throws {
        try await self.giveHistory()
        if scenarios.contains(.idle) { try await self.readToSender(into: &results) }
        if scenarios.contains(.load) { try await self.readToSenderUnderLoad(into: &results) }
        if scenarios.contains(.fanout) { try await self.fanOut(into: &results) }
        if scenarios.contains(.http) { try await self.httpCeiling(into: &results) }
        if scenarios.contains(.send) || scenarios.contains(.single) {
            // The single mark-reads read the messages the send figure sent.
            let messages = try await self.sendThroughput(into: &results)
            if scenarios.contains(.single) {
                try await self.settleDatabase()
                try await self.markReadSingle(messages: messages, into: &results)
            }
        }
        if scenarios.contains(.batches) { try await self.markReadBatches(into: &results) }
        if scenarios.contains(.raw) { try await self.rawReference(into: &results) }
        if scenarios.contains(.readall) { try await self.readAll(into: &results) }
        if scenarios.contains(.unread) { try await self.unreadCounts(into: &results) }
        if scenarios.contains(.threads) { try await self.threads(into: &results) }
        if scenarios.contains(.largeGroup) { try await self.largeGroups(into: &results) }
        if scenarios.contains(.deleteMessage) { try await self.deleteMessageCost(into: &results) }
        if scenarios.contains(.deleteChat) { try await self.deleteLargeChat(into: &results) }
        if scenarios.contains(.erase) { try await self.eraseUser(into: &results) }
        if scenarios.contains(.webhook) { try await self.webhooks(into: &results) }
        if scenarios.contains(.markLatency) { try await self.markReadLatency(into: &results) }
        if scenarios.contains(.streams) { try await self.streamsAtScale(.webSocket, into: &results) }
        if scenarios.contains(.streamsSSE) { try await self.streamsAtScale(.serverSentEvents, into: &results) }
        if scenarios.contains(.fairness) { try await self.fairness(into: &results) }
        if scenarios.contains(.streamFairness) { try await self.streamFairness(into: &results) }
        if scenarios.contains(.replicas) { try await self.replicas(into: &results) }
        // Last: the thousand tenants of the one and the imported history of the other would
        // change the database every later scenario measures.
        if scenarios.contains(.tenants) { try await self.historyCost(into: &results) }
        if scenarios.contains(.importHistory) { try await self.importHistory(into: &results) }
    }

    /// Gives the new database a history and the planner its statistics, as in any database
    /// autovacuum has seen. Without statistics PostgreSQL cannot tell a message's key from
    /// its chat's (every index on the chat looks as good), and the plans the service's
    /// sessions cache in the first seconds would read a chat's whole history per lookup
    /// until autovacuum's first ANALYZE (BENCHMARKS.md); the figures are about the service
    /// after that first minute.
    func giveHistory() async throws {
        let chats = 20
        let perChat = self.count(10_000, minimum: 100) / chats
        for index in 1...chats {
            try await self.client.expect(201, .PUT, "/v1/chats/history\(index)", as: self.tenant.apiKey,
                                         body: ["kind": "direct", "members": ["h\(index)", "k\(index)"]])
            try await self.insertMessages(chat: "history\(index)", sender: "h\(index)", count: perChat)
        }
        try await self.settleDatabase()
    }

    // MARK: - Read to sender

    /// A recipient's read request until the sender's WebSocket has the receipt.read, with
    /// nothing else going on.
    /// Then where that time goes, hop by hop (`idlePathHops`).
    func readToSender(into results: inout BenchResults) async throws {
        let before = try await self.readRequestTotals()
        let latencies = try await self.measureReadToSender(chat: "latency", samples: self.count(300, minimum: 20))
        let after = try await self.readRequestTotals()
        results.add("read-to-sender latency, idle", latencies: latencies.delivered, target: "p50 ≤ 2, p99 ≤ 5")
        results.add("… the read request's own answer", latencies: latencies.answered, target: "",
                    note: "n=\(latencies.answered.count); the rest is the way to the sender")
        // As chat apps run: the reader's own device is connected too, so the hub reads the
        // reader's unread totals for their unread.changed before it relays the page.
        let withReader = try await self.measureReadToSender(
            chat: "latency-reader", samples: self.count(300, minimum: 20), readerConnected: true)
        results.add("read-to-sender latency, idle, the reader's device connected", latencies: withReader.delivered, target: "",
                    note: "n=\(withReader.delivered.count); its unread.changed carries the reader's totals")
        let requests = after.count - before.count
        try await self.idlePathHops(
            serviceMilliseconds: requests > 0 ? (after.seconds - before.seconds) / requests * 1000 : nil, into: &results)
    }

    /// Reads one message at a time in a direct chat and times each until the sender's
    /// WebSocket has it, and until the read request itself was answered; returns
    /// milliseconds (the first 20 are warm-up and not returned).
    func measureReadToSender(
        chat: String, samples: Int, readerConnected: Bool = false
    ) async throws -> (delivered: [Double], answered: [Double]) {
        let key = self.tenant.apiKey
        try await self.client.expect(201, .PUT, "/v1/chats/\(chat)", as: key, body: ["kind": "direct", "members": ["alice", "bob"]])
        let token = try await self.client.expect(201, .POST, "/v1/tokens", as: key, body: ["userId": "alice"])["token"] as! String
        let readerToken = try await self.client.expect(201, .POST, "/v1/tokens", as: key, body: ["userId": "bob"])["token"] as! String
        // The reader stamps each receipt as it arrives; the loop below waits for it without
        // spinning (a busy wait would take one of the machine's two cores from the service).
        let (arrivals, arrive) = AsyncStream.makeStream(of: (ids: [String], at: ContinuousClock.Instant).self)
        let url = self.client.baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/v1/stream?token=\(token)"
        let client = self.client
        var delivered: [Double] = []
        var answered: [Double] = []
        try await withThrowingTaskGroup(of: Void.self) { group in
            let opened = NIOLockedValueBox(false)
            group.addTask {
                try await WebSocketClient.connect(url: url, logger: Logger(label: "bench-ws")) { inbound, _, _ in
                    opened.withLockedValue { $0 = true }
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        let arrived = ContinuousClock.now  // before parsing: the receipt is here
                        guard case .text(let text) = message,
                            let event = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                            event["type"] as? String == "receipt.read", let ids = event["messageIds"] as? [String]
                        else { continue }
                        arrive.yield((ids, arrived))
                    }
                }
            }
            let readerOpened = NIOLockedValueBox(!readerConnected)
            if readerConnected {
                // The reader's device: takes its events (unread.changed among them) and drops them.
                let readerURL = self.client.baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/v1/stream?token=\(readerToken)"
                group.addTask {
                    try await WebSocketClient.connect(url: readerURL, logger: Logger(label: "bench-ws-reader")) { inbound, _, _ in
                        readerOpened.withLockedValue { $0 = true }
                        for try await _ in inbound.messages(maxSize: 1 << 20) {}
                    }
                }
            }
            while !opened.withLockedValue({ $0 }) || !readerOpened.withLockedValue({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
            var inbox: [String: ContinuousClock.Instant] = [:]
            var receipts = arrivals.makeAsyncIterator()
            for index in 0..<(samples + 20) {
                let message = try await client.expect(201, .POST, "/v1/chats/\(chat)/messages", as: key, body: ["senderId": "alice", "text": "x"])
                let id = message["id"] as! String
                let start = ContinuousClock.now
                try await client.check(200, .POST, "/v1/chats/\(chat)/read", as: key, body: ["userId": "bob", "messageIds": [id]])
                let answer = ContinuousClock.now
                while inbox[id] == nil {
                    guard let receipt = await receipts.next() else { throw BenchFailure("the WebSocket closed") }
                    for read in receipt.ids { inbox[read] = receipt.at }
                }
                let arrived = inbox[id]
                if index >= 20 {
                    delivered.append(Double((arrived! - start) / .microseconds(1)) / 1000)
                    answered.append(Double((answer - start) / .microseconds(1)) / 1000)
                }
            }
            group.cancelAll()
        }
        return (delivered, answered)
    }

    // MARK: - Throughput

    /// `GET /healthz` (no database, no authentication) per second by `concurrency` clients:
    /// what this machine's loopback HTTP, the service's HTTP stack and this client cost
    /// together, the ceiling of every throughput figure below.
    func httpCeiling(into results: inout BenchResults) async throws {
        let client = self.client
        let requests = try await self.callsPerSecond(perClient: self.count(20_000, minimum: 100) / self.concurrency + 1) { _, _ in
            try await client.check(200, .GET, "/healthz", as: nil)
        }
        results.add(Figure.http, unit: "requests/s", value: requests,
                    target: "", note: "\(self.concurrency) clients")
    }

    /// Messages sent per second by `concurrency` clients, each in a chat of its own.
    /// Returns the ids per chat, for the mark-read figures.
    func sendThroughput(into results: inout BenchResults) async throws -> [String: [String]] {
        let key = self.tenant.apiKey
        let perClient = self.count(20_000, minimum: 100) / self.concurrency + 1
        for index in 0..<self.concurrency {
            try await self.client.expect(201, .PUT, "/v1/chats/send\(index)", as: key, body: ["kind": "direct", "members": ["s\(index)", "r\(index)"]])
        }
        // As before every figure: what the scenarios before left to vacuum is done first.
        try await self.settleDatabase()
        let client = self.client
        let cpu = CPUTimes.now(servicePID: self.servicePID)
        let start = ContinuousClock.now
        let sent = try await withThrowingTaskGroup(of: (String, [String]).self) { group in
            for index in 0..<self.concurrency {
                group.addTask {
                    var ids: [String] = []
                    for _ in 0..<perClient {
                        let message = try await client.expect(201, .POST, "/v1/chats/send\(index)/messages", as: key, body: ["senderId": "s\(index)", "text": "benchmark"])
                        ids.append(message["id"] as! String)
                    }
                    return ("send\(index)", ids)
                }
            }
            return try await group.reduce(into: [String: [String]]()) { $0[$1.0] = $1.1 }
        }
        let seconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
        let cost = CPUTimes.note(since: cpu, servicePID: self.servicePID, requests: perClient * self.concurrency)
        results.add(Figure.sends, unit: "messages/s", value: Double(perClient * self.concurrency) / seconds, target: "≥ 5,000",
                    note: ["\(self.concurrency) clients", cost].filter { !$0.isEmpty }.joined(separator: "; "))
        return sent
    }

    /// Single-message mark-read requests per second, `concurrency` clients.
    func markReadSingle(messages: [String: [String]], into results: inout BenchResults) async throws {
        let key = self.tenant.apiKey
        let client = self.client
        let cpu = CPUTimes.now(servicePID: self.servicePID)
        let start = ContinuousClock.now
        let requests = try await withThrowingTaskGroup(of: Int.self) { group in
            for (chat, ids) in messages {
                let reader = "r" + chat.dropFirst(4)
                group.addTask {
                    for id in ids {
                        try await client.check(200, .POST, "/v1/chats/\(chat)/read", as: key, body: ["userId": reader, "messageIds": [id]])
                    }
                    return ids.count
                }
            }
            return try await group.reduce(0, +)
        }
        let seconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
        let cost = CPUTimes.note(since: cpu, servicePID: self.servicePID, requests: requests)
        results.add(Figure.singleMarkReads, unit: "requests/s", value: Double(requests) / seconds, target: "≥ 5,000",
                    note: ["\(self.concurrency) clients", cost].filter { !$0.isEmpty }.joined(separator: "; "))
    }

    /// Receipts per second when each request marks 100 messages.
    func markReadBatches(into results: inout BenchResults) async throws {
        let key = self.tenant.apiKey
        let perChat = max(100, self.count(100_000, minimum: 100) / self.concurrency / 100 * 100)
        var messages: [String: [String]] = [:]
        for index in 0..<self.concurrency {
            let chat = "batch\(index)"
            try await self.client.expect(201, .PUT, "/v1/chats/\(chat)", as: key, body: ["kind": "direct", "members": ["s\(index)", "r\(index)"]])
            try await self.insertMessages(chat: chat, sender: "s\(index)", count: perChat)
            messages[chat] = (1...perChat).map { "\(chat)-\($0)" }
        }
        try await self.settleDatabase()
        let client = self.client
        let cpu = CPUTimes.now(servicePID: self.servicePID)
        let start = ContinuousClock.now
        let marked = try await withThrowingTaskGroup(of: Int.self) { group in
            for (chat, ids) in messages {
                let reader = "r" + chat.dropFirst(5)
                group.addTask {
                    var marked = 0
                    for batch in stride(from: 0, to: ids.count, by: 100) {
                        let answer = try await client.expect(
                            200, .POST, "/v1/chats/\(chat)/read", as: key,
                            body: ["userId": reader, "messageIds": Array(ids[batch..<min(ids.count, batch + 100)])])
                        marked += answer["marked"] as? Int ?? 0
                    }
                    return marked
                }
            }
            return try await group.reduce(0, +)
        }
        let seconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
        let cost = CPUTimes.note(since: cpu, servicePID: self.servicePID, requests: marked, unit: "receipt")
        results.add(Figure.batches, unit: "receipts/s", value: Double(marked) / seconds, target: "≥ 50,000",
                    note: "\(marked) receipts; " + cost)
    }

    /// The raw reference: the guarded `UPDATE … array_append` that marks one message read
    /// (on the reader's receipt chunk row, chunk 0 in a direct chat), straight at
    /// PostgreSQL with the same concurrency, one statement per transaction;
    /// then the service's whole SQL function for a single mark-read the same way (the
    /// database's share of a request). Both as the table owner, in sessions set up like the
    /// service's (`receipts.notify = off`); the event trigger runs as it does for the service.
    /// Then the CPU-bound reference beside this fsync-bound one (`selectByKeyReference`), and
    /// the service's throughputs of this run over the raw UPDATE (`addRatiosToRaw`).
    func rawReference(into results: inout BenchResults) async throws {
        let perClient = self.count(20_000, minimum: 100) / self.concurrency + 1
        for index in 0..<self.concurrency {
            for chat in ["raw\(index)", "rawfn\(index)"] {
                try await self.client.expect(201, .PUT, "/v1/chats/\(chat)", as: self.tenant.apiKey,
                                             body: ["kind": "direct", "members": ["s\(index)", "r\(index)"]])
                try await self.insertMessages(chat: chat, sender: "s\(index)", count: perClient)
            }
        }
        try await self.settleDatabase()
        let tenant = self.tenant.id
        let statement = """
            UPDATE receipts.receipt_chunks AS receipt SET
                read_by      = array_append(receipt.read_by, $3),
                read_at      = array_append(receipt.read_at, now()),
                delivered_to = CASE WHEN $3 = ANY (receipt.delivered_to) THEN receipt.delivered_to ELSE array_append(receipt.delivered_to, $3) END,
                delivered_at = CASE WHEN $3 = ANY (receipt.delivered_to) THEN receipt.delivered_at ELSE array_append(receipt.delivered_at, now()) END
            FROM receipts.messages AS message
            WHERE message.tenant_id = $1 AND message.chat_id = $2 AND message.message_id = $4
              AND message.sender_id <> $3
              AND receipt.tenant_id = $1 AND receipt.chat_id = $2 AND receipt.seq = message.seq AND receipt.chunk = 0
              AND NOT ($3 = ANY (receipt.read_by)) AND NOT ($3 = ANY (receipt.hidden_read_by))
            """
        let pool = self.database.servicePool
        let updates = try await self.callsPerSecond(perClient: perClient) { index, message in
            let marked = try await pool.execute(statement, [tenant, "raw\(index)", "r\(index)", "raw\(index)-\(message)"])
            guard marked == 1 else { throw BenchFailure("the raw UPDATE marked \(marked) rows, not 1") }
        }
        results.add("raw reference: guarded UPDATE … array_append", unit: "statements/s", value: updates,
                    target: "single reads ≥ 1.5 × this", note: "\(self.concurrency) connections")
        let calls = try await self.callsPerSecond(perClient: perClient) { index, message in
            try await pool.query(
                "SELECT outcome, marked, unread_count FROM receipts.mark_read($1, $2, $3, $4, NULL)",
                [tenant, "rawfn\(index)", "r\(index)", ["rawfn\(index)-\(message)"]])
        }
        results.add("the service's SQL: receipts.mark_read via libpq", unit: "calls/s", value: calls,
                    target: "", note: "\(self.concurrency) connections")
        try await self.selectByKeyReference(perClient: perClient, into: &results)
        Self.addRatiosToRaw(updates, into: &results)
    }

    /// The CPU-bound reference beside the fsync-bound raw UPDATE: a member row read by its
    /// key, with the same concurrency, each statement outside any explicit transaction (as
    /// pgbench's select-only). No write and no commit waiting on the disk: it moves with the
    /// VM's CPU alone, so a day whose figures all fell with it is a slow day, not slow code.
    /// (The HTTP stack's own rate, `GET /healthz`, is the `http` scenario's row.)
    private func selectByKeyReference(perClient: Int, into results: inout BenchResults) async throws {
        let tenant = self.tenant.id
        let pool = self.database.servicePool
        let selects = try await self.callsPerSecond(perClient: perClient) { index, _ in
            let rows = try await pool.query(
                "SELECT read_seq FROM receipts.chat_members WHERE tenant_id = $1 AND chat_id = $2 AND user_id = $3",
                [tenant, "raw\(index)", "r\(index)"])
            guard rows.count == 1 else { throw BenchFailure("the select by key found \(rows.count) member rows, not 1") }
        }
        let http = results.value(of: Figure.http).map { String(format: "GET /healthz in this run: %.0f requests/s", $0) }
            ?? "GET /healthz: --only http"
        results.add("CPU-bound reference: select by key via libpq", unit: "statements/s", value: selects, target: "",
                    note: "\(self.concurrency) connections; \(http)")
    }

    /// The service's throughputs of this run over the raw guarded UPDATE's, measured minutes
    /// apart on the same machine (figures of different runs do not compare on this VM); for
    /// the scenarios among `single`, `batches` and `send` that ran before `raw`.
    private static func addRatiosToRaw(_ updates: Double, into results: inout BenchResults) {
        let ratios = [
            (figure: Figure.singleMarkReads, name: "single mark-reads ÷ raw guarded UPDATE", unit: "requests/s", target: "≥ 1.5"),
            (figure: Figure.batches, name: "batches of 100 ÷ raw", unit: "receipts/s", target: "≥ 20"),
            (figure: Figure.sends, name: "sends ÷ raw", unit: "messages/s", target: "≥ 1.5"),
        ]
        for ratio in ratios {
            guard let value = results.value(of: ratio.figure) else { continue }
            results.add(ratio.name, unit: "×", value: value / updates, target: ratio.target,
                        note: "\(Int(value.rounded())) \(ratio.unit) ÷ \(Int(updates.rounded())) statements/s")
        }
    }

    /// Runs `call(client, n)` for n in 1…perClient in each of `concurrency` clients at once;
    /// returns calls per second.
    private func callsPerSecond(
        perClient: Int, _ call: @escaping @Sendable (Int, Int) async throws -> Void
    ) async throws -> Double {
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<self.concurrency {
                group.addTask {
                    for message in 1...perClient { try await call(index, message) }
                }
            }
            try await group.waitForAll()
        }
        let seconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1_000_000
        return Double(perClient * self.concurrency) / seconds
    }

    // MARK: - Read all, unread counts

    /// One request marking 10,000 unread messages read, in three chats one after another;
    /// each followed by the floor of the storage layout for the same work in a chat like it
    /// (`readAllFloor`), so that what the service adds to it is judged within the run.
    func readAll(into results: inout BenchResults) async throws {
        let count = self.count(10_000, minimum: 100)
        let chats = ["big1", "big2", "big3"]
        let floors = ["floor1", "floor2", "floor3"]
        for chat in chats + floors {
            try await self.client.expect(201, .PUT, "/v1/chats/\(chat)", as: self.tenant.apiKey, body: ["kind": "direct", "members": ["a", "b"]])
            try await self.insertMessages(chat: chat, sender: "a", count: count)
        }
        try await self.settleDatabase()
        var milliseconds: [Double] = []
        var floorMilliseconds: [Double] = []
        // In pairs, so that the VM's drift hits the read-alls and their floor alike.
        for (chat, floor) in zip(chats, floors) {
            let start = ContinuousClock.now
            let answer = try await self.client.expect(200, .POST, "/v1/chats/\(chat)/read", as: self.tenant.apiKey, body: ["userId": "b"])
            milliseconds.append(Double((ContinuousClock.now - start) / .microseconds(1)) / 1000)
            guard answer["marked"] as? Int == count else { throw BenchFailure("read-all marked \(answer["marked"] ?? "?"), not \(count)") }
            floorMilliseconds.append(try await self.readAllFloor(chat: floor, reader: "b", count: count))
        }
        results.add("read all of \(count) unread messages", unit: "ms", samples: milliseconds, target: "≤ 100 (10,000)")
        results.add("raw read-all floor", unit: "ms", samples: floorMilliseconds, target: "",
                    note: "one guarded range UPDATE of the \(count) chunk rows and its event trigger, via libpq")
        let readAll = BenchResults.median(milliseconds)
        let floor = BenchResults.median(floorMilliseconds)
        results.add("read-all ÷ raw read-all floor", unit: "×", value: readAll / floor, target: "≤ 1.25",
                    note: String(format: "medians %.1f ÷ %.1f ms", readAll, floor))
    }

    /// The floor of the storage layout for a read-all of `count` messages: one bare guarded
    /// range UPDATE appending `reader` to the receipt rows of messages 1…count (chunk 0: a
    /// direct chat's members), a transaction of its own with its commit, in a session like the
    /// service's; its event trigger writes the receipt.read event as for the service. What the
    /// service adds is all else: the request, the lookups, the member row and its
    /// unread.changed. Returns milliseconds.
    ///
    /// As the raw reference's UPDATE, straight as the bench's login (the tables' owner) with no
    /// tenant entered: receipt_chunks has FORCE ROW LEVEL SECURITY, which holds for the owner
    /// too but not for a superuser, as scripts/postgres.sh's role is. Under an owner that is
    /// not one, both see no rows and fail on the count below.
    private func readAllFloor(chat: String, reader: String, count: Int) async throws -> Double {
        let statement = """
            UPDATE receipts.receipt_chunks AS receipt SET
                read_by      = receipt.read_by || $3::text,
                read_at      = receipt.read_at || now(),
                delivered_to = CASE WHEN $3 = ANY (receipt.delivered_to) THEN receipt.delivered_to ELSE receipt.delivered_to || $3::text END,
                delivered_at = CASE WHEN $3 = ANY (receipt.delivered_to) THEN receipt.delivered_at ELSE receipt.delivered_at || now() END
            WHERE receipt.tenant_id = $1 AND receipt.chat_id = $2 AND receipt.chunk = 0 AND receipt.seq BETWEEN 1 AND $4
              AND NOT ($3 = ANY (receipt.read_by)) AND NOT ($3 = ANY (receipt.hidden_read_by))
            """
        let start = ContinuousClock.now
        let marked = try await self.database.servicePool.execute(statement, [self.tenant.id, chat, reader, count])
        let milliseconds = Double((ContinuousClock.now - start) / .microseconds(1)) / 1000
        guard marked == count else { throw BenchFailure("the read-all floor's UPDATE marked \(marked) rows, not \(count)") }
        return milliseconds
    }

    /// `GET /v1/users/{id}/unread` for a user in 1,000 chats with unread messages.
    func unreadCounts(into results: inout BenchResults) async throws {
        let chats = self.count(1000, minimum: 10)
        try await self.database.pool.query(
            """
            SELECT receipts.put_chat($1, 'many-' || g, 'direct', ARRAY['many-user', 'friend-' || g]),
                   receipts.send_message($1, 'many-' || g, 'm1', 'friend-' || g, 'hello'),
                   receipts.send_message($1, 'many-' || g, 'm2', 'friend-' || g, 'hello again')
            FROM generate_series(1, $2::int) AS g
            """,
            [self.tenant.id, chats])
        try await self.settleDatabase()
        var latencies: [Double] = []
        for _ in 0..<50 {
            // Timed up to the whole answer received; parsing it (70 KB at 1,000 chats) is the client's cost.
            let start = ContinuousClock.now
            let (status, body) = try await self.client.send(.GET, "/v1/users/many-user/unread", as: self.tenant.apiKey, body: nil)
            latencies.append(Double((ContinuousClock.now - start) / .microseconds(1)) / 1000)
            let answer = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
            guard status == 200, answer["total"] as? Int == 2 * chats else { throw BenchFailure("unread: \(status), total \(answer["total"] ?? "?")") }
        }
        results.add("unread counts, user in \(chats) chats", latencies: latencies, target: "p50 ≤ 10 (1,000 chats)")
    }

    /// Inserts `count` messages `<chat>-1…` straight through the SQL function (setup only;
    /// call `settleDatabase()` once the setup is done).
    func insertMessages(chat: String, sender: String, count: Int) async throws {
        try await self.database.pool.query(
            "SELECT receipts.send_message($1, $2, $2 || '-' || g, $3, 'benchmark') FROM generate_series(1, $4::int) AS g",
            [self.tenant.id, chat, sender, count])
    }

    /// After bulk setup, the database as autovacuum would keep it in one that grew at a
    /// normal pace (the bench fills tables within seconds): the planner's statistics, and the
    /// row versions earlier scenarios left behind cleaned up, so that autovacuum does not
    /// start on them in the middle of the next measurement.
    func settleDatabase() async throws {
        try await self.database.pool.withConnection {
            _ = try await $0.executeScript(
                "VACUUM (ANALYZE) receipts.messages, receipts.receipt_chunks, receipts.chats, receipts.chat_members, receipts.membership_periods, receipts.events")
        }
    }
}
