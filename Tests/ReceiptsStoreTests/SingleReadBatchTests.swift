import Postgres
import ReceiptsCore
import ReceiptsStore
import TestSupport
import Testing

/// `receipts.mark_read_each` marks a batch of single-message reads in one statement (the
/// service gathers concurrent ones into it). It must answer, and leave behind, exactly what
/// one `receipts.mark_read` per read (a batch of one) would have.
@Suite("Single reads in one statement")
struct SingleReadBatchTests {
    typealias Generator = UnreadCountTests.Generator

    /// One read of a batch: chat, user, message.
    struct Read {
        let chat: String
        let user: String
        let message: String
    }

    @Test("a batch answers and leaves what one mark_read per read would, through 150 random steps", arguments: [7, 8])
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
        for step in 0..<150 {
            switch random.next(10) {
            case 0, 1, 2, 3:
                let chat = random.next(3) == 0 ? "d" : "g"
                let sender = chat == "d" ? users[random.next(2)] : users[random.next(users.count)]
                try await both("SELECT receipts.send_message($1, $2, $3, $4, 'x')", [chat, "m\(step)", sender])
                messages[chat]!.append("m\(step)")
            case 4:
                let user = users[random.next(users.count)]
                let join = random.next(2) == 0
                try await both(join ? "SELECT receipts.join_chat($1, 'g', $2)" : "SELECT receipts.leave_chat($1, 'g', $2)", [user])
            case 5:
                try await both("SELECT receipts.mark_unread($1, 'g', $2)", [users[random.next(users.count)]])
            default:
                var reads: [Read] = []
                var members = Set<[String]>()
                for _ in 0...random.next(6) {
                    let chat = ["g", "g", "d", "missing"][random.next(4)]
                    let user = users[random.next(users.count)]
                    guard members.insert([chat, user]).inserted else { continue }
                    let known = messages[chat] ?? []
                    let message = known.isEmpty || random.next(8) == 0 ? "unknown" : known[random.next(known.count)]
                    reads.append(Read(chat: chat, user: user, message: message))
                }
                let answers = try await pool.query(
                    "SELECT outcome, marked::int8, unread_count::int8 FROM receipts.mark_read_each($1, $2, $3, $4, array_fill(false, ARRAY[cardinality($2::text[])]))",
                    [batched, reads.map(\.chat), reads.map(\.user), reads.map(\.message)])
                #expect(answers.count == reads.count)
                for (index, read) in reads.enumerated() {
                    let expected = try await pool.query(
                        "SELECT outcome, marked::int8, unread_count::int8 FROM receipts.mark_read($1, $2, $3, $4, NULL)",
                        [oneByOne, read.chat, read.user, [read.message]])[0]
                    let answer = answers[index]
                    let context = "seed \(seed), step \(step), read \(read)"
                    #expect(try answer.decode(String.self, column: 0) == expected.decode(String.self, column: 0), "\(context)")
                    #expect(try answer.decode(Int.self, column: 1) == expected.decode(Int.self, column: 1), "\(context)")
                    #expect(try answer.decode(Int.self, column: 2) == expected.decode(Int.self, column: 2), "\(context)")
                }
            }
            #expect(try await Self.state(of: batched) == Self.state(of: oneByOne), "seed \(seed), step \(step)")
        }
        // The same receipts were relayed: events alike, but for their ids and order.
        #expect(try await Self.events(of: batched) == Self.events(of: oneByOne))
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
