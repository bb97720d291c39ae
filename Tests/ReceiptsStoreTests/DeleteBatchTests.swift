import Postgres
import ReceiptsCore
import ReceiptsStore
import TestSupport
import Testing

/// `receipts.delete_message_each` deletes a batch of messages in one transaction (the service
/// gathers a tenant's concurrent deletes into it). It must answer, and leave behind, exactly
/// what one `receipts.delete_message` per request would have: outcomes, rows, counts, events.
@Suite("Deletes in one transaction")
struct DeleteBatchTests {
    typealias Generator = UnreadCountTests.Generator

    /// One delete of a batch.
    struct Delete: CustomStringConvertible {
        let chat: String
        let message: String
        let sender: String?
        var description: String { "\(self.chat)/\(self.message) by \(self.sender ?? "the tenant")" }
    }

    @Test("a batch answers and leaves what one delete_message per request would, through 200 random steps", arguments: [5, 6, 7])
    func matchesOneByOne(seed: UInt64) async throws {
        try await TestDatabase.ensureMigrated()
        let pool = TestDatabase.pool
        // Two tenants, driven alike: deletes in batches in one, one by one in the other.
        let batched = TestDatabase.uniqueName("deletes-batched")
        let oneByOne = TestDatabase.uniqueName("deletes-one-by-one")
        let users = ["u0", "u1", "u2", "u3"]
        let tenants = [batched, oneByOne]
        for tenant in tenants {
            try await pool.query("SELECT receipts.create_tenant($1, 'delete model', $2, $3)", [tenant, PostgresBytes(Array(tenant.utf8)), PostgresBytes([1])])
            try await pool.query("SELECT receipts.put_chat($1, 'g', 'group', $2)", [tenant, ["u0", "u1", "u2"]])
            try await pool.query("SELECT receipts.put_chat($1, 'd', 'direct', $2)", [tenant, ["u0", "u1"]])
        }

        var random = Generator(state: seed)
        var sent: [(chat: String, id: String)] = []
        var deletedCount = 0
        var outcomesSeen: Set<String> = []
        for step in 0..<200 {
            let user = users[random.next(users.count)]
            let chat = random.next(3) == 0 ? "d" : "g"
            switch random.next(8) {
            case 0, 1, 2:
                for tenant in tenants {
                    try await pool.query("SELECT receipts.send_message($1, $2, $3, $4, 'x')", [tenant, chat, "m\(step)", user])
                }
                sent.append((chat, "m\(step)"))
            case 3:
                let ids = sent.filter { $0.chat == chat }.map(\.id)
                guard !ids.isEmpty else { continue }
                let read: [String]? = random.next(2) == 0 ? [ids[random.next(ids.count)]] : nil
                let upTo: String? = read == nil && random.next(2) == 0 ? ids[random.next(ids.count)] : nil
                for tenant in tenants {
                    try await pool.query("SELECT receipts.mark_read($1, $2, $3, $4, $5)", [tenant, chat, user, read, upTo])
                }
            case 4:
                let join = random.next(2) == 0
                for tenant in tenants {
                    try await pool.query(join ? "SELECT receipts.join_chat($1, 'g', $2)" : "SELECT receipts.leave_chat($1, 'g', $2)", [tenant, user])
                }
            default:
                // A batch: one request per chat of some of them (a missing one too), any message
                // (sent, deleted before, never sent), by the tenant or by a user.
                var deletes: [Delete] = []
                let chats = ["g", "d", "missing"]
                let first = random.next(chats.count)
                for offset in chats.indices where random.next(4) > 0 {
                    let chat = chats[(first + offset) % chats.count]
                    let candidates = sent.filter { $0.chat == chat || chat == "missing" }.map(\.id)
                    let message = candidates.isEmpty || random.next(5) == 0 ? "never\(step)" : candidates[random.next(candidates.count)]
                    deletes.append(Delete(chat: chat, message: message, sender: random.next(2) == 0 ? nil : users[random.next(users.count)]))
                }
                guard !deletes.isEmpty else { continue }
                let answers = try await pool.query(
                    "SELECT request, outcome FROM receipts.delete_message_each($1, $2, $3, $4)",
                    [batched, deletes.map(\.chat), deletes.map(\.message), deletes.map(\.sender)])
                #expect(answers.count == deletes.count)
                for (index, delete) in deletes.enumerated() {
                    let expected = try await pool.query(
                        "SELECT receipts.delete_message($1, $2, $3, $4)", [oneByOne, delete.chat, delete.message, delete.sender]
                    ).scalar(String.self)
                    guard index < answers.count else { break }
                    #expect(try answers[index].decode(Int.self, column: 0) == index + 1)
                    let outcome = try answers[index].decode(String.self, column: 1)
                    #expect(outcome == expected, "seed \(seed), step \(step), \(delete)")
                    outcomesSeen.insert(outcome)
                    if outcome == "deleted" { deletedCount += 1 }
                }
            }
            #expect(try await Self.state(of: batched) == Self.state(of: oneByOne), "seed \(seed), step \(step)")
            for chat in ["g", "d"] {
                for user in users {
                    let expected = try await pool.query(UnreadDefinition.countedOneByOne, [batched, chat, user])
                    guard !expected.isEmpty else { continue }
                    let counted = try await pool.query("SELECT receipts.unread_count($1, $2, $3)::int8", [batched, chat, user]).scalar(Int.self)
                    #expect(counted == (try expected.scalar(Int.self)), "seed \(seed), step \(step), \(chat), \(user)")
                }
            }
        }
        // Every outcome came up, and deletes did delete.
        #expect(outcomesSeen == ["deleted", "already_deleted", "message_not_found", "not_sender", "chat_not_found"])
        #expect(deletedCount > 5)
        // The same events (message.deleted, unread.changed with the same counts), but for their ids and order.
        #expect(try await SingleReadBatchTests.events(of: batched) == SingleReadBatchTests.events(of: oneByOne))
        // Two requests of one chat are refused (the service keys deletes by chat): nothing done.
        await #expect(throws: PostgresError.self) {
            try await pool.query(
                "SELECT receipts.delete_message_each($1, $2, $3, $4)", [batched, ["g", "g"], ["never1", "never2"], [String?.none, nil]])
        }
    }

    /// Everything a delete may change, in a comparable form.
    static func state(of tenant: String) async throws -> [String] {
        let queries = [
            "SELECT concat_ws(' ', chat_id, seq, message_id, sender_id) FROM receipts.messages WHERE tenant_id = $1 ORDER BY chat_id, seq",
            "SELECT concat_ws(' ', chat_id, message_id) FROM receipts.deleted_messages WHERE tenant_id = $1 ORDER BY chat_id, message_id",
            """
            SELECT concat_ws(' ', chat_id, seq, chunk, read_by::text, delivered_to::text, hidden_read_by::text)
            FROM receipts.receipt_chunks WHERE tenant_id = $1 ORDER BY chat_id, seq, chunk
            """,
            """
            SELECT concat_ws(' ', chat_id, user_id, read_seq, reads_above, marked_unread, left_at IS NULL)
            FROM receipts.chat_members WHERE tenant_id = $1 ORDER BY chat_id, user_id
            """,
        ]
        var state: [String] = []
        for sql in queries {
            state += try await TestDatabase.pool.query(sql, [tenant]).map { try $0.decode(String.self, column: 0) }
        }
        return state
    }

    @Test("40 concurrent deletes through the store, in 8 chats, repeats among them: each answered as alone")
    func concurrentDeletes() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "deleters")
        let chats = (0..<8).map { "c\($0)" }
        for chat in chats {
            #expect(try await store.putChat(tenant: tenant, chat: chat, kind: .direct, members: ["a", "b"]) == .created)
            for index in 0..<4 {
                _ = try await store.sendMessage(tenant: tenant, chat: chat, id: "m\(index)", sender: index % 2 == 0 ? "a" : "b", text: "hi")
            }
        }
        // Per chat: m0 twice (one deletes, one finds it deleted), m1 by its sender, m2 by
        // someone else (refused), "never" (not found).
        let requests: [(chat: String, message: String, sender: String?)] = chats.flatMap { chat in
            [(chat, "m0", nil), (chat, "m0", nil), (chat, "m1", "b"), (chat, "m2", "b"), (chat, "never", nil)]
        }
        let outcomes = try await store.whileRunning {
            try await withThrowingTaskGroup(of: (Int, DeleteMessageOutcome).self) { group in
                for (index, request) in requests.enumerated() {
                    group.addTask {
                        (index, try await store.deleteMessage(tenant: tenant, chat: request.chat, id: request.message, sender: request.sender))
                    }
                }
                return try await group.reduce(into: [Int: DeleteMessageOutcome]()) { $0[$1.0] = $1.1 }
            }
        }
        await pool.close()
        for chat in chats {
            let answers = requests.indices.filter { requests[$0].chat == chat }.map { outcomes[$0] }
            #expect(answers.filter { $0 == .deleted }.count == 2, "\(chat): \(answers)")
            #expect(answers.filter { $0 == .alreadyDeleted }.count == 1, "\(chat): \(answers)")
            #expect(answers.filter { $0 == .notSender }.count == 1, "\(chat): \(answers)")
            #expect(answers.filter { $0 == .messageNotFound }.count == 1, "\(chat): \(answers)")
        }
        let left = try await TestDatabase.pool.query(
            "SELECT chat_id, array_agg(message_id ORDER BY seq)::text[] FROM receipts.messages WHERE tenant_id = $1 GROUP BY chat_id", [tenant]
        ).map { (try $0.decode(String.self, column: 0), try $0.decode([String].self, column: 1)) }
        #expect(left.count == chats.count)
        for (chat, ids) in left { #expect(ids == ["m2", "m3"], "\(chat)") }
        let deletedEvents = try await TestDatabase.pool.query(
            "SELECT count(*) FROM receipts.events WHERE tenant_id = $1 AND type = 'message.deleted'", [tenant]
        ).scalar(Int.self)
        #expect(deletedEvents == 2 * chats.count)
    }
}
