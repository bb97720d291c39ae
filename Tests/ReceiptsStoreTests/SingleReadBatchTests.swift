import Postgres
import ReceiptsCore
import ReceiptsStore
import TestSupport
import Testing

/// Reads have two statements made of the same SQL rules: `receipts.mark_read_each` for a batch
/// of requests (the service gathers concurrent ones into it) and `receipts.mark_read` for one
/// request (the service's call for a batch of one). A batch must answer, and leave behind,
/// exactly what one `receipts.mark_read` per request would have, for every shape of request:
/// messages by id (one, several, none, unknown ones), up to a message, everything, each of
/// those in the whole chat, the main timeline or a thread, by members, hidden readers, former
/// members and strangers.
@Suite("Single reads in one statement")
struct SingleReadBatchTests {
    typealias Generator = UnreadCountTests.Generator

    /// One request of a batch: a user's read in one chat.
    struct Read: CustomStringConvertible {
        enum Target {
            case messages([String])
            case upTo(String)
            case all
        }

        let chat: String
        let user: String
        let target: Target
        /// For a read up to a message or of all: nil the whole chat, "" the main timeline, else a root.
        let scope: String?

        /// Its items in `receipts.mark_read_each`: (message, through, scope).
        var items: [(message: String?, through: Bool, scope: String?)] {
            switch self.target {
            case .messages(let ids): ids.isEmpty ? [(nil, false, nil)] : ids.map { ($0, false, nil) }
            case .upTo(let id): [(id, true, self.scope)]
            case .all: [(nil, true, self.scope)]
            }
        }

        /// Its `p_message_ids` and `p_up_to` in `receipts.mark_read`.
        var oneByOne: (ids: [String]?, upTo: String?) {
            switch self.target {
            case .messages(let ids): (ids, nil)
            case .upTo(let id): (nil, id)
            case .all: (nil, nil)
            }
        }

        var description: String { "\(self.user) in \(self.chat): \(self.target), scope \(self.scope.map { "'\($0)'" } ?? "nil")" }
    }

    @Test("a batch answers and leaves what one mark_read per request would, for every shape of read, through 200 random steps",
          arguments: [7, 8, 9, 10])
    func matchesOneByOne(seed: UInt64) async throws {
        try await TestDatabase.ensureMigrated()
        let pool = TestDatabase.pool
        // Two tenants, driven alike: batches in one, the same reads one by one in the other.
        let batched = TestDatabase.uniqueName("batched")
        let oneByOne = TestDatabase.uniqueName("one-by-one")
        let users = ["u0", "u1", "u2", "u3"]
        for tenant in [batched, oneByOne] {
            try await pool.query("SELECT receipts.create_tenant($1, 'batch model', $2, $3)", [tenant, PostgresBytes(Array(tenant.utf8)), PostgresBytes([1])])
            try await pool.query("SELECT receipts.put_chat($1, 'g', 'group', $2)", [tenant, ["u0", "u1", "u2"]])
            try await pool.query("SELECT receipts.put_chat($1, 'd', 'direct', $2)", [tenant, ["u0", "u1"]])
            try await pool.query("SELECT receipts.set_read_receipts($1, 'u2', false)", [tenant])
        }
        func both(_ sql: String, _ parameters: [any PostgresEncodable]) async throws {
            for tenant in [batched, oneByOne] { try await pool.query(sql, [tenant] + parameters) }
        }

        var random = Generator(state: seed)
        var messages: [String: [String]] = ["g": [], "d": []]
        var roots: [String: [String]] = ["g": [], "d": []]
        for step in 0..<200 {
            switch random.next(10) {
            case 0, 1, 2, 3:
                let chat = random.next(3) == 0 ? "d" : "g"
                let sender = chat == "d" ? users[random.next(2)] : users[random.next(users.count)]
                // Every third message a reply in a thread, once the chat has a root.
                let thread = roots[chat]!.isEmpty || random.next(3) != 0 ? nil : roots[chat]![random.next(roots[chat]!.count)]
                try await both(
                    "SELECT receipts.send_each($1, ARRAY[$2], ARRAY[$3], ARRAY[$4], ARRAY['x'], p_threads => ARRAY[$5])",
                    [chat, "m\(step)", sender, thread])
                messages[chat]!.append("m\(step)")
                if thread == nil { roots[chat]!.append("m\(step)") }
            case 4:
                let user = users[random.next(users.count)]
                let join = random.next(2) == 0
                try await both(join ? "SELECT receipts.join_chat($1, 'g', $2)" : "SELECT receipts.leave_chat($1, 'g', $2)", [user])
            case 5:
                try await both("SELECT receipts.mark_unread($1, 'g', $2)", [users[random.next(users.count)]])
            default:
                let reads = Self.randomReads(&random, users: users, messages: messages, roots: roots)
                let items = reads.flatMap { read in read.items.map { (read, $0) } }
                let answers = try await pool.query(
                    "SELECT outcome, marked::int8, unread_count::int8 FROM receipts.mark_read_each($1, $2, $3, $4, $5, $6)",
                    [batched, items.map(\.0.chat), items.map(\.0.user), items.map(\.1.message), items.map(\.1.through),
                     items.map(\.1.scope)])
                #expect(answers.count == reads.count)
                for (index, read) in reads.enumerated() {
                    let expected = try await pool.query(
                        "SELECT outcome, marked::int8, unread_count::int8 FROM receipts.mark_read($1, $2, $3, $4, $5, $6)",
                        [oneByOne, read.chat, read.user, read.oneByOne.ids, read.oneByOne.upTo, read.scope])[0]
                    guard index < answers.count else { break }
                    let answer = answers[index]
                    let context = "seed \(seed), step \(step), read \(read)"
                    #expect(try answer.decode(String.self, column: 0) == expected.decode(String.self, column: 0), "\(context)")
                    #expect(try answer.decode(Int.self, column: 1) == expected.decode(Int.self, column: 1), "\(context)")
                    #expect(try answer.decode(Int.self, column: 2) == expected.decode(Int.self, column: 2), "\(context)")
                }
            }
            let (afterBatches, afterOneByOne) = (try await Self.state(of: batched), try await Self.state(of: oneByOne))
            #expect(afterBatches == afterOneByOne,
                    "seed \(seed), step \(step): \(afterBatches.filter { !afterOneByOne.contains($0) }) against \(afterOneByOne.filter { !afterBatches.contains($0) })")
            if afterBatches != afterOneByOne { break }
        }
        // The same receipts were relayed: events alike, but for their ids and order.
        #expect(try await Self.events(of: batched) == Self.events(of: oneByOne))
    }

    /// Up to seven reads of distinct (chat, user) pairs, of every shape: one message (the most
    /// common), several, none, up to a message, everything; some of unknown messages, roots or
    /// chats, scoped to the main timeline, a thread, a reply (no root) or nothing.
    static func randomReads(
        _ random: inout Generator, users: [String], messages: [String: [String]], roots: [String: [String]]
    ) -> [Read] {
        var reads: [Read] = []
        var pairs = Set<[String]>()
        for _ in 0...random.next(6) {
            let chat = ["g", "g", "d", "missing"][random.next(4)]
            let user = users[random.next(users.count)]
            guard pairs.insert([chat, user]).inserted else { continue }
            let known = messages[chat] ?? []
            func message() -> String { known.isEmpty || random.next(8) == 0 ? "unknown" : known[random.next(known.count)] }
            let target: Read.Target = switch random.next(8) {
            case 0: .messages((0...random.next(3)).map { _ in message() })
            case 1: .messages([])
            case 2, 3: .upTo(message())
            case 4: .all
            default: .messages([message()])
            }
            let chatRoots = roots[chat] ?? []
            let scope: String? = switch random.next(6) {
            case 0: ""
            case 1: chatRoots.isEmpty ? "unknown" : chatRoots[random.next(chatRoots.count)]
            case 2: random.next(2) == 0 ? "unknown" : message()  // maybe a reply: no root
            default: nil
            }
            let isThrough = if case .messages = target { false } else { true }
            reads.append(Read(chat: chat, user: user, target: target, scope: isThrough ? scope : nil))
        }
        return reads
    }

    /// Everything a read may change, in a comparable form.
    static func state(of tenant: String) async throws -> [String] {
        let messages = try await TestDatabase.pool.query(
            """
            SELECT concat_ws(' ', chat_id, message_id, chunk, read_by::text, hidden_read_by::text, delivered_to::text,
                             cardinality(read_at), cardinality(delivered_at))
            FROM receipts.receipt_chunks WHERE tenant_id = $1 ORDER BY chat_id, seq, chunk
            """, [tenant]
        ).map { try $0.decode(String.self, column: 0) }
        let members = try await TestDatabase.pool.query(
            """
            SELECT concat_ws(' ', chat_id, user_id, read_seq, delivered_seq, reads_above, marked_unread, last_read_at IS NULL,
                             receipts.unread_count($1, chat_id, user_id))
            FROM receipts.chat_members WHERE tenant_id = $1 ORDER BY chat_id, user_id
            """, [tenant]
        ).map { try $0.decode(String.self, column: 0) }
        return messages + members
    }

    static func events(of tenant: String) async throws -> [String] {
        try await TestDatabase.pool.query(
            """
            SELECT concat_ws(' ', type, chat_id, user_id, message_ids::text, data::text, audience::text, audience_version) AS event
            FROM receipts.events WHERE tenant_id = $1 ORDER BY event
            """, [tenant]
        ).map { try $0.decode(String.self, column: 0) }
    }

    @Test("40 members reading one group message at once through the store: each is a reader once, and told so")
    func concurrentReadersOfOneMessage() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "readers")
        let readers = (0..<40).map { "r\($0)" }
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: ["sender"] + readers) == .created)
        _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "hello", sender: "sender", text: "hi")
        _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "later", sender: "sender", text: "more")

        let answers = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for reader in readers + readers {  // every reader twice: the second read marks nothing
                group.addTask {
                    switch try await store.markRead(tenant: tenant, chat: "g", user: reader, target: .messages(["hello"])) {
                    case .success(let outcome): return (outcome.marked, outcome.unreadCount)
                    case .failure(let failure): throw failure
                    }
                }
            }
            return try await group.reduce(into: [(Int, Int)]()) { $0.append($1) }
        }
        #expect(answers.filter { $0.0 == 1 }.count == 40)
        #expect(answers.filter { $0.0 == 0 }.count == 40)
        #expect(answers.allSatisfy { $0.1 == 1 })  // "later" is still unread for everyone
        let readBy = try await TestDatabase.pool.query(
            """
            SELECT coalesce(array_agg(reader), '{}') FROM receipts.receipt_chunks AS receipt, unnest(receipt.read_by) AS reader
            WHERE receipt.tenant_id = $1 AND receipt.message_id = 'hello'
            """, [tenant]
        ).scalar([String].self)
        #expect(readBy.sorted() == readers.sorted())
        await pool.close()
    }
}
