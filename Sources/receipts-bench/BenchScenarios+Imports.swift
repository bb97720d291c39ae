import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Postgres

/// Bulk import (`POST /v1/imports`, docs/api.md): a million messages with their receipts load
/// within 60 s on this machine, while single reads of another tenant keep at least 80 % of
/// their rate; judged beside a raw `COPY` of the same rows in the same run (the VM's speed
/// moves tens of percent between runs, so only figures of one run compare).
extension BenchScenarios {
    // MARK: - Bulk import

    /// In a tenant of its own, an import of `ImportedHistory` (1,000,000 messages in group
    /// chats of five at full scale, each read by three of the other four members), sent as
    /// one NDJSON body; timed from the POST to its 202 (staging: the body parsed and COPY'd
    /// into `receipts.import_rows`) and from the 202 until `GET /v1/imports/{id}` (asked every
    /// 200 ms) says done (loading, by the import worker, a group of chats per transaction).
    ///
    /// Before it, in the same run: the same messages and receipt rows COPY'd straight into
    /// tables like `receipts.messages` and `receipt_chunks` (`rawCopy`), the floor of writing
    /// them; and the bench tenant's single mark-reads (`SingleReads`) alone for 5 s (1 s at
    /// least), then again for as long as the import runs, their rate during it over their
    /// rate alone.
    func importHistory(into results: inout BenchResults) async throws {
        guard let adminToken = self.adminToken else { throw BenchFailure("the import scenario needs the service's admin token") }
        let history = ImportedHistory(messages: self.count(1_000_000, minimum: 1_000))
        let importer = try await self.client.createTenant(adminToken: adminToken, name: "bench import")
        let reads = try await SingleReads(scenarios: self, messagesPerChat: self.count(2_000, minimum: 500))
        try await self.settleDatabase()

        let raw = try await self.rawCopy(of: history, tenant: importer.id)
        let body = history.ndjson()
        try await self.settleDatabase()

        let aloneStart = ContinuousClock.now
        let window = Duration.milliseconds(Int(max(1, 5 * self.scale) * 1000))
        let alone = try await reads.run { ContinuousClock.now < aloneStart + window }
        let aloneRate = SingleReads.rate(of: alone, from: aloneStart, to: .now)
        let (run, during) = try await self.importWhileReading(body, apiKey: importer.apiKey, reads: reads)

        Self.addImportRows(history: history, raw: raw, run: run, body: body.readableBytes, into: &results)
        Self.addReadRows(alone: alone, aloneRate: aloneRate, during: during, run: run, reads: reads, into: &results)
    }

    /// Imports `body` while `reads` run, until the import is no longer running; returns it,
    /// and the reads made meanwhile.
    private func importWhileReading(
        _ body: ByteBuffer, apiKey: String, reads: SingleReads
    ) async throws -> (ImportRun, [SingleReads.Sample]) {
        let stop = NIOLockedValueBox(false)
        async let reading = reads.run { !stop.withLockedValue { $0 } }
        let run: ImportRun
        do {
            run = try await self.importAndWait(body, apiKey: apiKey)
        } catch {
            stop.withLockedValue { $0 = true }
            _ = try? await reading
            throw error
        }
        stop.withLockedValue { $0 = true }
        return (run, try await reading)
    }

    /// The other tenant's reads alone and during the import, and their rate during it over
    /// their rate alone; during staging and loading apart too (staging shares the cores with
    /// the bench sending the body, and the service parsing it).
    private static func addReadRows(
        alone: [SingleReads.Sample], aloneRate: Double, during: [SingleReads.Sample], run: ImportRun, reads: SingleReads,
        into results: inout BenchResults
    ) {
        let staging = SingleReads.rate(of: during, from: run.posted, to: run.accepted)
        let loading = SingleReads.rate(of: during, from: run.accepted, to: run.finished)
        let whole = SingleReads.rate(of: during, from: run.posted, to: run.finished)
        results.add("import: another tenant's single reads, alone", latencies: alone.map(\.milliseconds), target: "",
                    note: String(format: "%.0f requests/s; %d clients, each a group chat of %d readers", aloneRate,
                                 reads.clients, SingleReads.readers))
        results.add("import: … during the import", latencies: during.map(\.milliseconds), target: "",
                    note: String(format: "%.0f requests/s; staging %.0f, loading %.0f", whole, staging, loading))
        results.add("import: single reads during the import ÷ alone", unit: "%", value: 100 * whole / aloneRate, target: "≥ 80",
                    note: String(format: "staging %.0f %%, loading %.0f %%", 100 * staging / aloneRate, 100 * loading / aloneRate))
        if reads.ranOut {
            results.add("import: WARNING the single reads ran out of messages", unit: "", value: 0, target: "",
                        note: "a client stopped before the import was done: the rate during it is low by that")
        }
    }

    /// The import's own rows: its phases, its total against the target and against the raw
    /// COPY, and a warning row when the service did not take every message.
    private static func addImportRows(
        history: ImportedHistory, raw: (time: Duration, reads: Int), run: ImportRun, body: Int, into results: inout BenchResults
    ) {
        let rawSeconds = Self.seconds(raw.time)
        let staging = Self.seconds(run.accepted - run.posted)
        let loading = Self.seconds(run.finished - run.accepted)
        let total = staging + loading
        results.add("import: raw COPY of the same rows", unit: "s", value: rawSeconds, target: "",
                    note: String(format: "%d message rows and %d chunk rows (%d reads) into tables like receipts.messages "
                                     + "and receipt_chunks with their indexes, one connection; %.0f messages/s",
                                 history.messages, history.messages, raw.reads, Double(history.messages) / rawSeconds))
        results.add("import: staging, POST until 202", unit: "s", value: staging, target: "",
                    note: String(format: "%.0f MB of NDJSON, %d lines; %.0f lines/s",
                                 Double(body) / 1_000_000, history.lines, Double(history.lines) / staging))
        results.add("import: loading, 202 until done", unit: "s", value: loading, target: "",
                    note: "\(history.chats) chats; the import worker, a group of chats per transaction, paced")
        results.add("import: \(history.messages) messages with their receipts, total", unit: "s", value: total,
                    target: "≤ 60 (1,000,000 messages)",
                    note: String(format: "%.0f messages/s, %.0f read receipts/s (%d given); the service counted %d receipts",
                                 Double(history.messages) / total, Double(history.givenReads) / total, history.givenReads,
                                 run.receipts))
        results.add("import total ÷ raw COPY", unit: "×", value: total / rawSeconds, target: "",
                    note: String(format: "%.1f ÷ %.1f s", total, rawSeconds))
        if run.state != "done" || run.messages != history.messages || run.rejected != 0 {
            results.add("import: WARNING not every message was taken", unit: "messages", value: Double(run.messages), target: "",
                        note: "state \(run.state), \(run.messages) of \(history.messages) messages imported, "
                            + "\(run.rejected) lines rejected; first errors: \(run.errors.prefix(300))")
        }
    }

    // MARK: - The import through the service

    /// What an import took: when it was posted, answered 202, and seen done; what the service
    /// says it imported.
    private struct ImportRun {
        let posted: ContinuousClock.Instant
        let accepted: ContinuousClock.Instant
        let finished: ContinuousClock.Instant
        let state: String
        let messages: Int
        let receipts: Int
        let rejected: Int
        let errors: String
    }

    /// Posts `body` as an import and asks for its state every 200 ms until it is no longer
    /// running (at most 30 minutes).
    private func importAndWait(_ body: ByteBuffer, apiKey: String) async throws -> ImportRun {
        let posted = ContinuousClock.now
        let id = try await self.postImport(body, apiKey: apiKey)
        let accepted = ContinuousClock.now
        while true {
            let state = try await self.client.expect(200, .GET, "/v1/imports/\(id)", as: apiKey)
            let phase = state["state"] as? String ?? "?"
            if phase != "running" {
                let imported = state["imported"] as? [String: Any] ?? [:]
                let errors = (state["errors"] as? [Any] ?? []).map { "\($0)" }.joined(separator: "; ")
                return ImportRun(
                    posted: posted, accepted: accepted, finished: .now, state: phase,
                    messages: imported["messages"] as? Int ?? -1, receipts: imported["receipts"] as? Int ?? -1,
                    rejected: state["rejected"] as? Int ?? -1, errors: errors)
            }
            guard ContinuousClock.now - accepted < .seconds(1800) else { throw BenchFailure("the import was still running after 30 minutes") }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    /// `POST /v1/imports` with `body` as NDJSON, on a connection of its own (the bench's
    /// client sends JSON objects only); returns the import's id from the 202. Waits a minute
    /// longer than the service gives a body to arrive (30 minutes: then 503).
    private func postImport(_ body: ByteBuffer, apiKey: String) async throws -> String {
        guard let url = URL(string: self.client.baseURL), let host = url.host, let port = url.port else {
            throw BenchFailure("the service URL \(self.client.baseURL) has no host and port")
        }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/imports")
        head.headers.add(name: "Host", value: host)
        head.headers.add(name: "Authorization", value: "Bearer \(apiKey)")
        head.headers.add(name: "Content-Type", value: "application/x-ndjson")
        head.headers.add(name: "Content-Length", value: String(body.readableBytes))
        let connection = try await LoopbackConnection.connect(host: host, port: port)
        let answer: LoopbackConnection.Answer
        do {
            answer = try await connection.exchange(head, body: body, timeout: .minutes(31))
        } catch {
            await connection.close()
            throw BenchFailure("POST /v1/imports: no answer within 31 minutes, or the connection failed: \(error)")
        }
        await connection.close()
        let object = (try? JSONSerialization.jsonObject(with: Data(answer.body.readableBytesView))) as? [String: Any] ?? [:]
        guard answer.status == 202, let id = object["importId"] as? String else {
            throw BenchFailure("POST /v1/imports: \(answer.status): \(String(buffer: answer.body).prefix(300))")
        }
        return id
    }

    // MARK: - The raw reference

    /// COPYs the history's messages and their receipt chunk rows (what loading writes for
    /// them: one row a message, its readers and their times in arrays) into plain logged
    /// tables made like `receipts.messages` and `receipts.receipt_chunks` with their indexes
    /// and checks, but with no triggers, foreign keys or row-level security; one connection,
    /// one COPY a table, as the bench's login. The rows are made before the clock starts, so
    /// that it times PostgreSQL alone. The tables are dropped afterwards.
    private func rawCopy(of history: ImportedHistory, tenant: String) async throws -> (time: Duration, reads: Int) {
        let (messages, chunks, reads) = history.copyRows(tenant: tenant)
        return try await self.database.pool.withConnection { connection in
            _ = try await connection.executeScript(
                """
                DROP SCHEMA IF EXISTS bench_copy CASCADE;
                CREATE SCHEMA bench_copy;
                CREATE TABLE bench_copy.messages (LIKE receipts.messages INCLUDING ALL) WITH (fillfactor = 100);
                CREATE TABLE bench_copy.receipt_chunks (LIKE receipts.receipt_chunks INCLUDING ALL) WITH (fillfactor = 70);
                """)
            let start = ContinuousClock.now
            try await Self.copy(messages, into: "bench_copy.messages (tenant_id, chat_id, message_id, seq, sender_id, body, created_at)",
                                on: connection)
            try await Self.copy(
                chunks, into: "bench_copy.receipt_chunks (tenant_id, chat_id, seq, chunk, message_id, delivered_to, delivered_at, read_by, read_at)",
                on: connection)
            let elapsed = ContinuousClock.now - start
            _ = try await connection.executeScript("DROP SCHEMA bench_copy CASCADE")
            return (elapsed, reads)
        }
    }

    /// One `COPY … FROM STDIN` of rows already in the text format, written in pieces of the
    /// writer's own size.
    private static func copy(_ rows: [UInt8], into table: String, on connection: PostgresConnection) async throws {
        try await connection.copyFrom("COPY \(table) FROM STDIN") { writer in
            for start in stride(from: 0, to: rows.count, by: 64 * 1024) {
                try await writer.write(rows[start..<min(rows.count, start + 64 * 1024)])
            }
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration / .microseconds(1)) / 1_000_000
    }
}

// MARK: - The history imported

/// The history the import scenario loads, made up the same way for its NDJSON body and for
/// the raw COPY's rows: group chats `c1…` of five members `u<chat>.1…5`, made on 2024-01-01,
/// a hundred messages `m1…m100` each, a minute apart, sent by the members in turn; each
/// read by three of the other four (a different one left out each time) seconds after it
/// was sent. In every tenth chat, member 1 then reads up to the last message (a read line),
/// which reads the messages it had been left out of.
///
/// Written byte by byte: a million lines through `JSONSerialization` would take the bench
/// longer than the import takes the service.
private struct ImportedHistory {
    static let members = 5
    static let messagesPerChat = 100

    let chats: Int
    var messages: Int { self.chats * Self.messagesPerChat }
    /// Lines of the body: a chat line, its messages, and a read line in every tenth chat.
    var lines: Int { self.chats * (1 + Self.messagesPerChat) + self.positions }
    /// Read receipts the message lines give (`readBy`).
    var givenReads: Int { self.messages * (Self.members - 2) }
    private var positions: Int { self.chats / 10 }

    init(messages: Int) {
        self.chats = max(1, messages / Self.messagesPerChat)
    }

    /// Whether chat `chat` has a read line, member 1's up to its last message.
    private static func hasPosition(_ chat: Int) -> Bool { chat.isMultiple(of: 10) }

    /// When (seconds into 2024-01-01, UTC) message `message` of `chat` was sent; 0 is when
    /// the chat was made. Chats start apart, so that not every line has the same times.
    private static func sentAt(_ message: Int, chat: Int) -> Int { chat % 3600 + message * 60 }

    /// Member 1's read line's time: ten minutes after the chat's last message.
    private static func positionAt(chat: Int) -> Int { Self.sentAt(Self.messagesPerChat, chat: chat) + 600 }

    private static func sender(of message: Int) -> Int { message % Self.members + 1 }

    /// The members who read `message` (in the order of their times) and when: every member
    /// but its sender and one other, five seconds apart.
    private static func readers(of message: Int, chat: Int) -> [(member: Int, at: Int)] {
        let sender = Self.sender(of: message)
        let others = (1...Self.members).filter { $0 != sender }
        let leftOut = others[(message / Self.members + chat) % others.count]
        return others.filter { $0 != leftOut }.enumerated().map { index, member in
            (member, Self.sentAt(message, chat: chat) + 5 * (index + 1))
        }
    }

    // MARK: The NDJSON body

    func ndjson() -> ByteBuffer {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(self.messages * 340)
        for chat in 1...self.chats {
            Self.appendChatLine(chat, to: &bytes)
            for message in 1...Self.messagesPerChat { Self.appendMessageLine(message, chat: chat, to: &bytes) }
            if Self.hasPosition(chat) { Self.appendPositionLine(chat: chat, to: &bytes) }
        }
        return ByteBuffer(bytes: bytes)
    }

    private static func appendChatLine(_ chat: Int, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: #"{"type":"chat","id":"c"#.utf8)
        Self.appendDecimal(chat, to: &bytes)
        bytes.append(contentsOf: #"","kind":"group","members":["#.utf8)
        for member in 1...Self.members {
            if member > 1 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: #"{"userId":""#.utf8)
            Self.appendUser(member, chat: chat, to: &bytes)
            bytes.append(contentsOf: #""}"#.utf8)
        }
        bytes.append(contentsOf: #"],"createdAt":""#.utf8)
        Self.appendTime(Self.sentAt(0, chat: chat), to: &bytes)
        bytes.append(contentsOf: "\"}\n".utf8)
    }

    private static func appendMessageLine(_ message: Int, chat: Int, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: #"{"type":"message","id":"m"#.utf8)
        Self.appendDecimal(message, to: &bytes)
        bytes.append(contentsOf: #"","chatId":"c"#.utf8)
        Self.appendDecimal(chat, to: &bytes)
        bytes.append(contentsOf: #"","senderId":""#.utf8)
        Self.appendUser(Self.sender(of: message), chat: chat, to: &bytes)
        bytes.append(contentsOf: #"","text":""#.utf8)
        Self.appendText(message, to: &bytes)
        bytes.append(contentsOf: #"","createdAt":""#.utf8)
        Self.appendTime(Self.sentAt(message, chat: chat), to: &bytes)
        bytes.append(contentsOf: #"","readBy":["#.utf8)
        for (index, reader) in Self.readers(of: message, chat: chat).enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: #"{"userId":""#.utf8)
            Self.appendUser(reader.member, chat: chat, to: &bytes)
            bytes.append(contentsOf: #"","at":""#.utf8)
            Self.appendTime(reader.at, to: &bytes)
            bytes.append(contentsOf: #""}"#.utf8)
        }
        bytes.append(contentsOf: "]}\n".utf8)
    }

    private static func appendPositionLine(chat: Int, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: #"{"type":"read","chatId":"c"#.utf8)
        Self.appendDecimal(chat, to: &bytes)
        bytes.append(contentsOf: #"","userId":""#.utf8)
        Self.appendUser(1, chat: chat, to: &bytes)
        bytes.append(contentsOf: #"","upTo":"m"#.utf8)
        Self.appendDecimal(Self.messagesPerChat, to: &bytes)
        bytes.append(contentsOf: #"","at":""#.utf8)
        Self.appendTime(Self.positionAt(chat: chat), to: &bytes)
        bytes.append(contentsOf: "\"}\n".utf8)
    }

    // MARK: The raw COPY's rows

    /// The rows loading writes for the messages, in COPY's text format: the messages
    /// (tenant, chat, id, seq, sender, text, time) and their one chunk row each (tenant,
    /// chat, seq, chunk 0, id, then delivered and read, which are the same members here: a
    /// read is a delivery too); and how many reads the chunk rows hold (those given, and
    /// those the read lines add).
    func copyRows(tenant: String) -> (messages: [UInt8], chunks: [UInt8], reads: Int) {
        var prefix: [UInt8] = []
        PostgresCopyText.appendField(tenant, to: &prefix)
        prefix.append(PostgresCopyText.fieldSeparator)
        var messages: [UInt8] = []
        var chunks: [UInt8] = []
        messages.reserveCapacity(self.messages * 80)
        chunks.reserveCapacity(self.messages * 220)
        var reads = 0
        for chat in 1...self.chats {
            for message in 1...Self.messagesPerChat {
                Self.appendMessageRow(message, chat: chat, prefix: prefix, to: &messages)
                reads += Self.appendChunkRow(message, chat: chat, prefix: prefix, to: &chunks)
            }
        }
        return (messages, chunks, reads)
    }

    private static func appendMessageRow(_ message: Int, chat: Int, prefix: [UInt8], to bytes: inout [UInt8]) {
        Self.appendKey(chat: chat, prefix: prefix, to: &bytes)
        bytes.append(UInt8(ascii: "m"))
        Self.appendDecimal(message, to: &bytes)
        bytes.append(PostgresCopyText.fieldSeparator)
        Self.appendDecimal(message, to: &bytes)
        bytes.append(PostgresCopyText.fieldSeparator)
        Self.appendUser(Self.sender(of: message), chat: chat, to: &bytes)
        bytes.append(PostgresCopyText.fieldSeparator)
        Self.appendText(message, to: &bytes)
        bytes.append(PostgresCopyText.fieldSeparator)
        Self.appendTime(Self.sentAt(message, chat: chat), to: &bytes)
        bytes.append(PostgresCopyText.rowEnd)
    }

    /// Returns how many readers the row has.
    private static func appendChunkRow(_ message: Int, chat: Int, prefix: [UInt8], to bytes: inout [UInt8]) -> Int {
        var readers = Self.readers(of: message, chat: chat)
        if Self.hasPosition(chat), Self.sender(of: message) != 1, !readers.contains(where: { $0.member == 1 }) {
            readers.append((1, Self.positionAt(chat: chat)))
        }
        Self.appendKey(chat: chat, prefix: prefix, to: &bytes)
        Self.appendDecimal(message, to: &bytes)
        bytes.append(PostgresCopyText.fieldSeparator)
        bytes.append(UInt8(ascii: "0"))
        bytes.append(PostgresCopyText.fieldSeparator)
        bytes.append(UInt8(ascii: "m"))
        Self.appendDecimal(message, to: &bytes)
        for _ in 0..<2 {  // delivered_to, delivered_at, then read_by, read_at
            bytes.append(PostgresCopyText.fieldSeparator)
            Self.appendArray(readers, to: &bytes) { Self.appendUser($0.member, chat: chat, to: &$1) }
            bytes.append(PostgresCopyText.fieldSeparator)
            Self.appendArray(readers, to: &bytes) { Self.appendTime($0.at, to: &$1) }
        }
        bytes.append(PostgresCopyText.rowEnd)
        return readers.count
    }

    /// `<tenant>\tc<chat>\t`, as both tables' rows begin.
    private static func appendKey(chat: Int, prefix: [UInt8], to bytes: inout [UInt8]) {
        bytes.append(contentsOf: prefix)
        bytes.append(UInt8(ascii: "c"))
        Self.appendDecimal(chat, to: &bytes)
        bytes.append(PostgresCopyText.fieldSeparator)
    }

    /// An array literal of quoted elements (ids and times need no escapes).
    private static func appendArray<Element>(
        _ elements: [Element], to bytes: inout [UInt8], _ appendElement: (Element, inout [UInt8]) -> Void
    ) {
        bytes.append(UInt8(ascii: "{"))
        for (index, element) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "\""))
            appendElement(element, &bytes)
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
    }

    // MARK: Values

    /// `u<chat>.<member>`: users of a chat of their own, as in an app with many small groups.
    private static func appendUser(_ member: Int, chat: Int, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "u"))
        Self.appendDecimal(chat, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        Self.appendDecimal(member, to: &bytes)
    }

    private static func appendText(_ message: Int, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: "message number ".utf8)
        Self.appendDecimal(message, to: &bytes)
    }

    /// `2024-01-01T<hh:mm:ss>Z` for `seconds` into that day (all the history's times are
    /// within it).
    private static func appendTime(_ seconds: Int, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: "2024-01-01T".utf8)
        for (index, part) in [seconds / 3600, seconds / 60 % 60, seconds % 60].enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ":")) }
            bytes.append(UInt8(ascii: "0") + UInt8(part / 10))
            bytes.append(UInt8(ascii: "0") + UInt8(part % 10))
        }
        bytes.append(UInt8(ascii: "Z"))
    }

    private static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
        if value >= 10 { Self.appendDecimal(value / 10, to: &bytes) }
        bytes.append(UInt8(ascii: "0") + UInt8(value % 10))
    }
}

// MARK: - The other tenant's single reads

/// The bench tenant's single mark-reads beside the import: `concurrency` clients, each
/// marking one message read per request, one request after another, as the `single`
/// scenario does. Each client has a group chat of its own of a sender and `readers` readers,
/// whose readers read its messages in turn (each reader every message, in order): the
/// messages serve `readers` reads each, so that a few thousand of them last for minutes of
/// requests. Each `run` goes on where the last one stopped.
private final class SingleReads: Sendable {
    static let readers = 16

    let clients: Int
    private let client: BenchClient
    private let apiKey: String
    private let messagesPerChat: Int
    /// Each client's next read: reader `n / messagesPerChat`, message `n % messagesPerChat`.
    private let next: NIOLockedValueBox<[Int]>
    private let exhausted = NIOLockedValueBox(false)

    /// A finished request: when, and how long it took (ms).
    struct Sample: Sendable {
        let finished: ContinuousClock.Instant
        let milliseconds: Double
    }

    init(scenarios: BenchScenarios, messagesPerChat: Int) async throws {
        self.clients = scenarios.concurrency
        self.client = scenarios.client
        self.apiKey = scenarios.tenant.apiKey
        self.messagesPerChat = messagesPerChat
        self.next = NIOLockedValueBox(Array(repeating: 0, count: scenarios.concurrency))
        for index in 0..<self.clients {
            let members = [Self.sender(index)] + (1...Self.readers).map { Self.reader($0, index) }
            try await scenarios.client.expect(201, .PUT, "/v1/chats/\(Self.chat(index))", as: self.apiKey,
                                              body: ["kind": "group", "members": members])
            try await scenarios.insertMessages(chat: Self.chat(index), sender: Self.sender(index), count: messagesPerChat)
        }
    }

    private static func chat(_ index: Int) -> String { "import-reads\(index)" }
    private static func sender(_ index: Int) -> String { "irs\(index)" }
    private static func reader(_ number: Int, _ index: Int) -> String { "irr\(index)-\(number)" }

    /// Whether a client had read every message before a run was over.
    var ranOut: Bool { self.exhausted.withLockedValue { $0 } }

    /// Runs every client while `going()` says so; returns each request.
    func run(while going: @escaping @Sendable () -> Bool) async throws -> [Sample] {
        try await withThrowingTaskGroup(of: [Sample].self) { group in
            for index in 0..<self.clients {
                group.addTask {
                    var samples: [Sample] = []
                    while going(), let (reader, message) = self.take(index) {
                        let chat = Self.chat(index)
                        let started = ContinuousClock.now
                        try await self.client.check(
                            200, .POST, "/v1/chats/\(chat)/read", as: self.apiKey,
                            body: ["userId": Self.reader(reader, index), "messageIds": ["\(chat)-\(message)"]])
                        let finished = ContinuousClock.now
                        samples.append(Sample(finished: finished, milliseconds: Double((finished - started) / .microseconds(1)) / 1000))
                    }
                    return samples
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
    }

    /// Client `index`'s next read (reader number, message number), nil once it has none.
    private func take(_ index: Int) -> (Int, Int)? {
        let n = self.next.withLockedValue { next -> Int in
            defer { next[index] += 1 }
            return next[index]
        }
        guard n < Self.readers * self.messagesPerChat else {
            self.exhausted.withLockedValue { $0 = true }
            return nil
        }
        return (n / self.messagesPerChat + 1, n % self.messagesPerChat + 1)
    }

    /// Requests finished between `start` and `end`, per second.
    static func rate(of samples: [Sample], from start: ContinuousClock.Instant, to end: ContinuousClock.Instant) -> Double {
        let count = samples.count(where: { $0.finished >= start && $0.finished <= end })
        return Double(count) / (Double((end - start) / .microseconds(1)) / 1_000_000)
    }
}
