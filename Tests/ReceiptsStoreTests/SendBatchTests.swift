import NIOCore
import Postgres
import ReceiptsCore
import ReceiptsStore
import TestSupport
import Testing

/// `receipts.send_each` sends a batch of messages, one per chat, in one statement (the
/// service gathers concurrent sends into it). It must answer, and leave behind, exactly
/// what one `receipts.send_message` per message would have.
@Suite("Sends in one statement")
struct SendBatchTests {
    typealias Generator = UnreadCountTests.Generator

    /// One send of a batch.
    struct Send {
        let chat: String
        let id: String
        let sender: String
        let text: String
    }

    @Test("a batch answers and leaves what one send_message per message would, through 150 random steps", arguments: [3, 4])
    func matchesOneByOne(seed: UInt64) async throws {
        try await TestDatabase.ensureMigrated()
        let pool = TestDatabase.pool
        // Two tenants, driven alike: batches in one, the same sends one by one in the other.
        let batched = TestDatabase.uniqueName("sends-batched")
        let oneByOne = TestDatabase.uniqueName("sends-one-by-one")
        let users = ["u0", "u1", "u2", "u3"]
        for tenant in [batched, oneByOne] {
            try await pool.query("SELECT receipts.create_tenant($1, 'send model', $2, $3)", [tenant, PostgresBytes(Array(tenant.utf8)), PostgresBytes([1])])
            try await pool.query("SELECT receipts.put_chat($1, 'g', 'group', $2)", [tenant, ["u0", "u1", "u2"]])
            try await pool.query("SELECT receipts.put_chat($1, 'd', 'direct', $2)", [tenant, ["u0", "u1"]])
        }

        var random = Generator(state: seed)
        var sent: [Send] = []  // created so far, to send again (same content, or another)
        for step in 0..<150 {
            if random.next(6) == 0 {
                let user = users[random.next(users.count)]
                let join = random.next(2) == 0
                for tenant in [batched, oneByOne] {
                    try await pool.query(join ? "SELECT receipts.join_chat($1, 'g', $2)" : "SELECT receipts.leave_chat($1, 'g', $2)", [tenant, user])
                }
                continue
            }
            var sends: [Send] = []
            let chats = ["g", "d", "missing"]
            let first = random.next(chats.count)
            for offset in chats.indices where random.next(3) > 0 {
                let chat = chats[(first + offset) % chats.count]
                let earlier = sent.filter { $0.chat == chat }
                switch random.next(6) {
                case 0 where !earlier.isEmpty:  // the same message again
                    sends.append(earlier[random.next(earlier.count)])
                case 1 where !earlier.isEmpty:  // an id used before, other content
                    let reused = earlier[random.next(earlier.count)]
                    sends.append(Send(chat: chat, id: reused.id, sender: reused.sender, text: "other"))
                default:
                    sends.append(Send(chat: chat, id: "m\(step)", sender: users[random.next(users.count)], text: "text \(step)"))
                }
            }
            guard !sends.isEmpty else { continue }
            let answers = try await pool.query(
                "SELECT outcome, seq, created_at IS NULL FROM receipts.send_each($1, $2, $3, $4, $5)",
                [batched, sends.map(\.chat), sends.map(\.id), sends.map(\.sender), sends.map(\.text)])
            #expect(answers.count == sends.count)
            for (index, send) in sends.enumerated() {
                let expected = try await pool.query(
                    "SELECT outcome, seq, created_at IS NULL FROM receipts.send_message($1, $2, $3, $4, $5)",
                    [oneByOne, send.chat, send.id, send.sender, send.text])[0]
                let answer = answers[index]
                let context = "seed \(seed), step \(step), send \(send)"
                let outcome = try answer.decode(String.self, column: 0)
                #expect(try outcome == expected.decode(String.self, column: 0), "\(context)")
                #expect(try answer.decode(Int64?.self, column: 1) == expected.decode(Int64?.self, column: 1), "\(context)")
                #expect(try answer.decode(Bool.self, column: 2) == expected.decode(Bool.self, column: 2), "\(context)")
                if outcome == "created" { sent.append(send) }
            }
            #expect(try await Self.state(of: batched) == Self.state(of: oneByOne), "seed \(seed), step \(step)")
        }
        #expect(sent.count > 30)  // the steps did create messages
        // The same messages were announced: events alike, but for their ids and order.
        #expect(try await SingleReadBatchTests.events(of: batched) == SingleReadBatchTests.events(of: oneByOne))
    }

    /// Everything a send may change, in a comparable form.
    static func state(of tenant: String) async throws -> [String] {
        let messages = try await TestDatabase.pool.query(
            "SELECT concat_ws(' ', chat_id, seq, message_id, sender_id, body) FROM receipts.messages WHERE tenant_id = $1 ORDER BY chat_id, seq",
            [tenant]
        ).map { try $0.decode(String.self, column: 0) }
        let chats = try await TestDatabase.pool.query(
            "SELECT concat_ws(' ', chat_id, last_seq) FROM receipts.chats WHERE tenant_id = $1 ORDER BY chat_id", [tenant]
        ).map { try $0.decode(String.self, column: 0) }
        return messages + chats
    }

    @Test("60 concurrent sends through the store, 20 of them into one chat: each is created once, seqs 1…n in every chat")
    func concurrentSends() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "senders")
        for chat in 0..<40 {
            #expect(try await store.putChat(tenant: tenant, chat: "c\(chat)", kind: .direct, members: ["a", "b"]) == .created)
        }
        let sends = (0..<40).map { ("c\($0)", "m") } + (0..<20).map { ("c0", "n\($0)") }
        let outcomes = try await withThrowingTaskGroup(of: SendOutcome.self) { group in
            for (chat, id) in sends {
                group.addTask { try await store.sendMessage(tenant: tenant, chat: chat, id: id, sender: "a", text: "hi") }
            }
            return try await group.reduce(into: [SendOutcome]()) { $0.append($1) }
        }
        #expect(outcomes.count == 60)
        #expect(outcomes.allSatisfy { if case .created = $0 { true } else { false } })
        let seqs = try await TestDatabase.pool.query(
            "SELECT chat_id, array_agg(seq ORDER BY seq) FROM receipts.messages WHERE tenant_id = $1 GROUP BY chat_id", [tenant]
        ).map { (try $0.decode(String.self, column: 0), try $0.decode([Int64].self, column: 1)) }
        #expect(seqs.count == 40)
        for (chat, chatSeqs) in seqs {
            #expect(chatSeqs == Array(1...Int64(chat == "c0" ? 21 : 1)), "\(chat)")
        }
        // The same message once more, after all that: the same message, not a new one.
        let again = try await store.sendMessage(tenant: tenant, chat: "c7", id: "m", sender: "a", text: "hi")
        guard case .existing(let message) = again else { Issue.record("expected .existing, got \(again)"); return }
        #expect(message.seq == 1)
        await pool.close()
    }

    @Test("a message the table refuses fails alone: the others sent beside it, in its batch or not, are created")
    func refusedMessageFailsAlone() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "refused")
        for chat in 0..<20 {
            #expect(try await store.putChat(tenant: tenant, chat: "c\(chat)", kind: .direct, members: ["a", "b"]) == .created)
        }
        // The HTTP layer refuses a text this long before the store; here the table's check
        // does, and fails the whole statement of a batch that holds it.
        let tooLong = String(repeating: "x", count: 70_000)
        let outcomes = await withTaskGroup(of: (Int, Result<SendOutcome, any Error>).self) { group in
            for chat in 0..<20 {
                group.addTask {
                    let text = chat == 13 ? tooLong : "hi"
                    do {
                        return (chat, .success(try await store.sendMessage(tenant: tenant, chat: "c\(chat)", id: "m", sender: "a", text: text)))
                    } catch {
                        return (chat, .failure(error))
                    }
                }
            }
            return await group.reduce(into: [Int: Result<SendOutcome, any Error>]()) { $0[$1.0] = $1.1 }
        }
        await pool.close()
        for chat in 0..<20 {
            switch outcomes[chat] {
            case .success(.created)? where chat != 13: break
            case .failure(let error as PostgresError)? where chat == 13:
                #expect(error.sqlState == PostgresError.SQLState.checkViolation)
            default: Issue.record("chat c\(chat): \(String(describing: outcomes[chat]))")
            }
        }
        let created = try await TestDatabase.pool.query(
            "SELECT count(*) FROM receipts.messages WHERE tenant_id = $1", [tenant])[0].decode(Int64.self, column: 0)
        #expect(created == 19)
    }

    @Test(
        "a send that waits on a chat locked elsewhere does not hold up the tenant's sends to other chats, whether the store runs as a service or not",
        arguments: [true, false])
    func lockedChatDoesNotStallOthers(asService: Bool) async throws {
        // The blocked send waits as long as the test needs: this is about batching, not about
        // the database timeout (a statement behind a lock for 5 s answers 503; see
        // DatabaseTimeoutTests).
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "locked", databaseTimeout: .seconds(60))
        for chat in ["locked", "free"] {
            #expect(try await store.putChat(tenant: tenant, chat: chat, kind: .direct, members: ["a", "b"]) == .created)
        }
        try await store.whileRunning(asService: asService) {
        // An operator's open transaction holds the chat row, as psql would.
        let lockHolder = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
        try await lockHolder.executeScript("BEGIN")
        try await lockHolder.query("SELECT FROM receipts.chats WHERE tenant_id = $1 AND chat_id = 'locked' FOR UPDATE", [tenant])
        let blocked = Task { try await store.sendMessage(tenant: tenant, chat: "locked", id: "m", sender: "a", text: "hi") }
        try await Self.waitUntilASessionWaitsOnALock(heldBy: lockHolder.backendPID)

        // The free chat's send goes through while the locked one waits (or, failing that,
        // the lock goes after 10 s, so the test ends).
        let free = try await withThrowingTaskGroup(of: SendOutcome?.self) { group in
            group.addTask { try await store.sendMessage(tenant: tenant, chat: "free", id: "m", sender: "a", text: "hi") }
            group.addTask { try await Task.sleep(for: .seconds(10)); return nil }
            let first = try await group.next() ?? nil
            if first == nil { try await lockHolder.executeScript("ROLLBACK") }
            group.cancelAll()
            return first
        }
        let sentToLockedMeanwhile = try await TestDatabase.pool.query(
            "SELECT count(*) FROM receipts.messages WHERE tenant_id = $1 AND chat_id = 'locked'", [tenant]
        )[0].decode(Int64.self, column: 0)
        try await lockHolder.executeScript("COMMIT")  // (a no-op after the ROLLBACK above)
        let sent = try await blocked.value
        await lockHolder.close()
        await pool.close()

        if case .created? = free {} else { Issue.record("expected .created while the other chat is locked, got \(String(describing: free))") }
        #expect(sentToLockedMeanwhile == 0)
        if case .created = sent {} else { Issue.record("expected .created once the lock went, got \(sent)") }
        }
    }

    @Test("a cancelled send is answered at once: taken into a batch, it may still commit; still queued, it is withdrawn")
    func cancelledSendsAreReleased() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "cancelled", databaseTimeout: .seconds(60))
        #expect(try await store.putChat(tenant: tenant, chat: "locked", kind: .direct, members: ["a", "b"]) == .created)
        try await store.whileRunning {
            let lockHolder = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
            try await lockHolder.executeScript("BEGIN")
            try await lockHolder.query("SELECT FROM receipts.chats WHERE tenant_id = $1 AND chat_id = 'locked' FOR UPDATE", [tenant])
            // m1 is taken into a batch, whose statement waits on the lock; m2, on the same
            // chat, waits in the queue behind it (one request per chat at a time).
            let taken = Task { try await store.sendMessage(tenant: tenant, chat: "locked", id: "m1", sender: "a", text: "hi") }
            try await Self.waitUntilASessionWaitsOnALock(heldBy: lockHolder.backendPID)
            let queued = Task { try await store.sendMessage(tenant: tenant, chat: "locked", id: "m2", sender: "a", text: "hi") }
            try await Task.sleep(for: .milliseconds(200))

            for request in [taken, queued] {
                let start = ContinuousClock.now
                request.cancel()
                await #expect(throws: CancellationError.self) { try await request.value }
                // Answered while the lock is still held (not when the statement ends).
                #expect(ContinuousClock.now - start < .seconds(5))
            }
            try await lockHolder.executeScript("COMMIT")
            await lockHolder.close()

            // The taken one's batch went on and committed; the queued one was never sent. The
            // chat takes the next send as usual.
            let next = try await store.sendMessage(tenant: tenant, chat: "locked", id: "m3", sender: "a", text: "hi")
            if case .created(let message) = next { #expect(message.seq == 2) } else { Issue.record("got \(next)") }
            let sent = try await TestDatabase.pool.query(
                "SELECT array_agg(message_id::text ORDER BY seq) FROM receipts.messages WHERE tenant_id = $1", [tenant]
            )[0].decode([String].self, column: 0)
            #expect(sent == ["m1", "m3"])
        }
        await pool.close()
    }

    @Test("without its service running, a send queued behind a locked chat is answered deadlineExceeded at its deadline, and nothing of it is done")
    func queuedSendMeetsItsDeadline() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "queued-deadline", databaseTimeout: .seconds(60))
        #expect(try await store.putChat(tenant: tenant, chat: "locked", kind: .direct, members: ["a", "b"]) == .created)
        let lockHolder = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
        try await lockHolder.executeScript("BEGIN")
        try await lockHolder.query("SELECT FROM receipts.chats WHERE tenant_id = $1 AND chat_id = 'locked' FOR UPDATE", [tenant])
        // m1 is taken into a batch whose statement waits on the lock; m2, on the same chat,
        // waits in the queue behind it, with a deadline of its own.
        let taken = Task { try await store.sendMessage(tenant: tenant, chat: "locked", id: "m1", sender: "a", text: "hi") }
        try await Self.waitUntilASessionWaitsOnALock(heldBy: lockHolder.backendPID)
        let start = ContinuousClock.now
        let error = await #expect(throws: PostgresError.self) {
            try await PostgresDeadline.within(.milliseconds(500)) {
                try await store.sendMessage(tenant: tenant, chat: "locked", id: "m2", sender: "a", text: "hi")
            }
        }
        #expect(error?.code == .deadlineExceeded)
        #expect(ContinuousClock.now - start < .seconds(5))
        try await lockHolder.executeScript("COMMIT")
        await lockHolder.close()
        if case .created = try await taken.value {} else { Issue.record("m1 was not created") }
        let sent = try await TestDatabase.pool.query(
            "SELECT array_agg(message_id::text ORDER BY seq) FROM receipts.messages WHERE tenant_id = $1", [tenant]
        )[0].decode([String].self, column: 0)
        #expect(sent == ["m1"])
        await pool.close()
    }

    /// Returns once some session waits for a lock that the session `holder` holds.
    private static func waitUntilASessionWaitsOnALock(heldBy holder: Int32) async throws {
        for _ in 0..<500 {
            let waiting = try await TestDatabase.pool.query(
                "SELECT count(*) FROM pg_stat_activity WHERE $1::int4 = ANY (pg_blocking_pids(pid))", [holder]
            )[0].decode(Int64.self, column: 0)
            if waiting > 0 { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("no session came to wait on the lock")
    }
}
