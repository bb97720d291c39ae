import Postgres
import TestSupport
import Testing

/// `receipts.unread_count` is arithmetic on the read watermark (see
/// `sql/views/unread.sql`). These tests drive a chat through random
/// sends, reads in and out of order, hidden reads, leaves and rejoins, deletes, and after every step
/// compare it with the definition counted message by message.
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

    @Test("the arithmetic count equals the count message by message, through 300 random steps, deletes included", arguments: [1, 2, 3])
    func matchesDefinition(seed: UInt64) async throws {
        try await TestDatabase.ensureMigrated()
        let pool = TestDatabase.pool
        let tenant = TestDatabase.uniqueName("unread")
        let users = ["u0", "u1", "u2", "u3"]
        try await pool.query("SELECT receipts.create_tenant($1, 'unread model', $2, $3)", [tenant, PostgresBytes(Array(tenant.utf8)), PostgresBytes([1])])
        try await pool.query("SELECT receipts.put_chat($1, 'g', 'group', $2)", [tenant, ["u0", "u1", "u2"]])

        var random = Generator(state: seed)
        var messages: [String] = []
        for step in 0..<300 {
            let user = users[random.next(users.count)]
            switch random.next(11) {
            case 0, 1, 2:
                let id = "m\(step)"
                let outcome = try await pool.query("SELECT outcome FROM receipts.send_message($1, 'g', $2, $3, 'x')", [tenant, id, user])
                    .scalar(String.self)
                if outcome == "created" { messages.append(id) }
            case 3, 4:
                guard !messages.isEmpty else { continue }
                let ids = (0...random.next(4)).map { _ in messages[random.next(messages.count)] }
                try await self.read(tenant: tenant, user: user, ids: ids, upTo: nil)
            case 5:
                guard !messages.isEmpty else { continue }
                try await self.read(tenant: tenant, user: user, ids: nil, upTo: messages[random.next(messages.count)])
            case 6:
                try await self.read(tenant: tenant, user: user, ids: nil, upTo: nil)
            case 7:
                try await pool.query("SELECT receipts.set_read_receipts($1, $2, $3)", [tenant, user, random.next(2) == 0])
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
                // The list of a user's chats computes the same, and lists the chat only when it counts.
                let listed = try await pool.query(
                    "SELECT unread_count::int8 FROM receipts.unread_counts($1, $2) WHERE chat_id = 'g'", [tenant, user])
                #expect((listed.isEmpty ? 0 : try listed.scalar(Int.self)) == count, "seed \(seed), step \(step), user \(user)")
            }
        }
    }

    /// Marks read and checks the count the marking answers against the definition.
    private func read(tenant: String, user: String, ids: [String]?, upTo: String?) async throws {
        let rows = try await TestDatabase.pool.query(
            "SELECT outcome, unread_count::int8 FROM receipts.mark_read($1, 'g', $2, $3, $4)", [tenant, user, ids, upTo])
        guard try rows[0].decode(String.self, column: 0) == "marked" else { return }
        let expected = try await TestDatabase.pool.query(Self.countedOneByOne, [tenant, "g", user]).scalar(Int.self)
        #expect(try rows[0].decode(Int.self, column: 1) == expected)
    }
}
