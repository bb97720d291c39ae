import Postgres
import TestSupport
import Testing

/// `receipts.unread_count` is arithmetic on the read watermark (see
/// `sql/views/unread.sql`). These tests drive a chat through random
/// sends (replies in threads and mentions among them), reads in and out of order, hidden
/// reads, leaves and rejoins, mutes, deletes (roots with their replies), and after every step
/// compare the counts and unread mentions with the definition counted message by message.
@Suite("Unread counts in SQL")
struct UnreadCountTests {
    /// A small deterministic generator, so a failure can be replayed.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            self.state = self.state &* 6364136223846793005 &+ 1442695040888963407
            return Int((self.state >> 33) % UInt64(bound))
        }

        /// The next state's bits mixed (the low bits of the state alone repeat quickly), for
        /// the standard library's shuffles and picks.
        mutating func next() -> UInt64 {
            self.state = self.state &* 6364136223846793005 &+ 1442695040888963407
            var mixed = (self.state ^ (self.state >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return mixed ^ (mixed >> 31)
        }
    }

    static let countedOneByOne = UnreadDefinition.countedOneByOne
    static let mentionsCountedOneByOne = UnreadDefinition.mentionsCountedOneByOne

    @Test("the arithmetic count and unread mentions equal the definition message by message, through 300 random steps with threads, mentions, mutes and deletes", arguments: [1, 2, 3])
    func matchesDefinition(seed: UInt64) async throws {
        try await TestDatabase.ensureMigrated()
        let pool = TestDatabase.pool
        let tenant = TestDatabase.uniqueName("unread")
        let users = ["u0", "u1", "u2", "u3"]
        try await pool.query("SELECT receipts.create_tenant($1, 'unread model', $2, $3)", [tenant, PostgresBytes(Array(tenant.utf8)), PostgresBytes([1])])
        try await pool.query("SELECT receipts.put_chat($1, 'g', 'group', $2)", [tenant, ["u0", "u1", "u2"]])

        var random = Generator(state: seed)
        var messages: [String] = []
        // The root of each reply.
        var threadOf: [String: String] = [:]
        var muted: Set<String> = []
        for step in 0..<300 {
            let user = users[random.next(users.count)]
            switch random.next(11) {
            case 0, 1, 2:
                let id = "m\(step)"
                // A reply now and then, to a message of the main timeline; mentions of some users
                // (strangers and the sender among them), or of all.
                let roots = messages.filter { threadOf[$0] == nil }
                let thread = !roots.isEmpty && random.next(3) == 0 ? roots[random.next(roots.count)] : nil
                let named = users.filter { _ in random.next(3) == 0 } + (random.next(5) == 0 ? ["stranger"] : [])
                let everyone = random.next(8) == 0
                let outcome = try await pool.query(
                    """
                    SELECT outcome FROM receipts.send_each($1, ARRAY['g'], ARRAY[$2], ARRAY[$3], ARRAY['x'], ARRAY[$4::boolean],
                                                          $5::integer[], $6::text[], ARRAY[$7])
                    """,
                    [tenant, id, user, everyone, named.map { _ in Int32(1) }, named, thread]
                ).scalar(String.self)
                if outcome == "created" {
                    messages.append(id)
                    if let thread { threadOf[id] = thread }
                }
            case 3, 4:
                guard !messages.isEmpty else { continue }
                let ids = (0...random.next(4)).map { _ in messages[random.next(messages.count)] }
                try await self.read(tenant: tenant, user: user, ids: ids, upTo: nil)
            case 5:
                guard !messages.isEmpty else { continue }
                try await self.read(
                    tenant: tenant, user: user, ids: nil, upTo: messages[random.next(messages.count)],
                    scope: Self.scope(&random, messages: messages, threadOf: threadOf))
            case 6:
                try await self.read(tenant: tenant, user: user, ids: nil, upTo: nil, scope: Self.scope(&random, messages: messages, threadOf: threadOf))
            case 7:
                if random.next(2) == 0 {
                    try await pool.query("SELECT receipts.set_read_receipts($1, $2, $3)", [tenant, user, random.next(2) == 0])
                } else {
                    let mute = random.next(2) == 0
                    let outcome = try await pool.query("SELECT receipts.set_chat_muted($1, 'g', $2, $3)", [tenant, user, mute])
                        .scalar(String.self)
                    if outcome == "set" {
                        if mute { muted.insert(user) } else { muted.remove(user) }
                    }
                }
            case 8:
                if random.next(2) == 0 {
                    try await pool.query("SELECT receipts.leave_chat($1, 'g', $2)", [tenant, user])
                } else {
                    try await pool.query("SELECT receipts.join_chat($1, 'g', $2)", [tenant, user])
                }
            case 10:
                // Deleting a message: read or unread, own or not, above or below watermarks.
                guard !messages.isEmpty else { continue }
                let id = messages.remove(at: random.next(messages.count))
                let outcome = try await pool.query("SELECT receipts.delete_message($1, 'g', $2, NULL)", [tenant, id]).scalar(String.self)
                #expect(outcome == "deleted")
                // A root takes its replies with it.
                messages.removeAll { threadOf[$0] == id }
            default:
                if random.next(2) == 0 {
                    try await pool.query("SELECT receipts.mark_unread($1, 'g', $2)", [tenant, user])
                } else {
                    try await pool.query("SELECT receipts.mark_delivered($1, 'g', $2, NULL, NULL)", [tenant, user])
                }
            }
            for user in users {
                let expected = try await pool.query(Self.countedOneByOne, [tenant, "g", user])
                guard !expected.isEmpty else { continue }
                let count = try expected.scalar(Int.self)
                let counted = try await pool.query("SELECT receipts.unread_count($1, 'g', $2)::int8", [tenant, user]).scalar(Int.self)
                #expect(counted == count, "seed \(seed), step \(step), user \(user)")
                // The list of a user's chats computes the same, and lists the chat only when it
                // counts, with its unread mentions and whether the user muted it.
                let mentions = try await pool.query(Self.mentionsCountedOneByOne, [tenant, "g", user]).scalar(Int.self)
                let listed = try await pool.query(
                    "SELECT unread_count::int8, mentions::int8, muted FROM receipts.unread_counts($1, $2) WHERE chat_id = 'g'",
                    [tenant, user])
                let row = try listed.first.map { try $0.decode((Int, Int, Bool).self) } ?? (0, 0, muted.contains(user))
                #expect(row.0 == count, "seed \(seed), step \(step), user \(user)")
                #expect(row.1 == mentions, "mentions: seed \(seed), step \(step), user \(user)")
                #expect(row.2 == muted.contains(user), "muted: seed \(seed), step \(step), user \(user)")
            }
        }
    }

    /// A read's scope, now and then: the whole chat (nil), the main timeline (''), or a thread
    /// (a root's id, or now and then a reply's, which is no root).
    private static func scope(_ random: inout Generator, messages: [String], threadOf: [String: String]) -> String? {
        switch random.next(4) {
        case 0: return ""
        case 1 where !messages.isEmpty: return messages[random.next(messages.count)]
        default: return nil
        }
    }

    /// Marks read and checks the count the marking answers against the definition.
    private func read(tenant: String, user: String, ids: [String]?, upTo: String?, scope: String? = nil) async throws {
        let items = ids ?? [upTo].compactMap { $0 }
        let through = ids == nil
        let rows = try await TestDatabase.pool.query(
            """
            SELECT outcome, unread_count::int8
            FROM receipts.mark_read_each($1, array_fill('g'::text, ARRAY[$5::int]), array_fill($2::text, ARRAY[$5::int]), $3::text[],
                                         array_fill($4::boolean, ARRAY[$5::int]), array_fill($6::text, ARRAY[$5::int]))
            """,
            [tenant, user, through && items.isEmpty ? [nil] : items.map { Optional($0) }, through, max(items.count, 1), through ? scope : nil])
        guard try rows[0].decode(String.self, column: 0) == "marked" else { return }
        let expected = try await TestDatabase.pool.query(Self.countedOneByOne, [tenant, "g", user]).scalar(Int.self)
        #expect(try rows[0].decode(Int.self, column: 1) == expected)
    }
}
