import NIOCore
import Postgres
import ReceiptsStore
import TestSupport
import Testing

/// An import survives its instance: what is staged is in the database, loading goes a group
/// of chats per transaction under a lease, and another instance takes over from the group
/// the first had reached once its lease has expired (sql/migrations/0028_imports.sql).
@Suite("Import resumption")
struct ImportResumeTests {
    @Test("an instance that stops halfway leaves the import to another, which finishes it from the next group: nothing twice, nothing lost")
    func takeover() async throws {
        try await TestDatabase.ensureMigrated()
        let pool = TestDatabase.pool
        let store = ReceiptsStore(pool: pool, logger: TestDatabase.logger)
        let tenant = TestDatabase.uniqueName("import-resume")
        try await pool.query("SELECT receipts.create_tenant($1, 'import resume', $2, $3)", [tenant, PostgresBytes(Array(tenant.utf8)), PostgresBytes([1])])

        // Ten chats of five messages, each read by the other member.
        var lines: [String] = []
        for chat in 0..<10 {
            lines.append(#"{"type":"chat","id":"c\#(chat)","kind":"direct","members":[{"userId":"a"},{"userId":"b"}]}"#)
            for message in 0..<5 {
                lines.append(
                    #"{"type":"message","id":"m\#(message)","chatId":"c\#(chat)","senderId":"a","text":"t","createdAt":"2024-01-01T10:0\#(message):00Z","readBy":[{"userId":"b","at":"2024-01-02T00:00:00Z"}]}"#)
            }
        }
        let body = [ByteBuffer(string: lines.joined(separator: "\n"))].async
        // Held by "first" from the start (the services of other tests look for imports too).
        let lease = Duration.seconds(30)
        let staged = try await store.stageImport(
            tenant: tenant, id: "resumed", body: body, maximumBytes: 1 << 20, owner: (name: "first", lease: lease))
        #expect(staged.lines == 60 && staged.rejected == 0 && staged.units == 10)

        // The first instance loads two groups of two chats (11 staged rows a chat), then stops.
        let only = (tenant: tenant, id: "resumed")
        let claimed = try #require(try await store.claimImport(owner: "first", lease: lease, only: only))
        #expect(claimed.tenant == tenant && claimed.id == "resumed")
        #expect(try await store.loadImportGroup(tenant: tenant, id: "resumed", owner: "first", lease: lease, maximumRows: 22)
            == .loaded(unitsLoaded: 2, units: 10))
        #expect(try await store.loadImportGroup(tenant: tenant, id: "resumed", owner: "first", lease: lease, maximumRows: 22)
            == .loaded(unitsLoaded: 4, units: 10))
        let halfway = try #require(try await store.importState(tenant: tenant, id: "resumed"))
        #expect(halfway.phase == .running && halfway.chats == 4 && halfway.messages == 20)

        // Another instance cannot take it while the lease lasts, nor load a group of it.
        #expect(try await store.claimImport(owner: "second", lease: lease, only: only) == nil)
        #expect(try await store.loadImportGroup(tenant: tenant, id: "resumed", owner: "second", lease: lease, maximumRows: 22) == .notHolder)
        // The first instance is gone: its lease runs out (made to, rather than waited for).
        try await pool.withTransaction { connection in
            try await connection.query("SELECT receipts.enter_tenant($1)", [tenant])
            try await connection.query("UPDATE receipts.imports SET lease_expires_at = now() - interval '1 second' WHERE tenant_id = $1", [tenant])
        }
        #expect(try await store.claimImport(owner: "second", lease: lease, only: only)?.id == "resumed")
        var outcome = ImportGroupOutcome.notHolder
        for _ in 0..<10 {
            outcome = try await store.loadImportGroup(tenant: tenant, id: "resumed", owner: "second", lease: .seconds(30), maximumRows: 22)
            if case .done = outcome { break }
        }
        #expect(outcome == .done(units: 10))
        // The first instance, back, holds nothing.
        #expect(try await store.loadImportGroup(tenant: tenant, id: "resumed", owner: "first", lease: lease, maximumRows: 22) == .notHolder)

        let done = try #require(try await store.importState(tenant: tenant, id: "resumed"))
        #expect(done.phase == .done && done.chats == 10 && done.messages == 50 && done.receipts == 100 && done.rejected == 0)
        let counts = try await pool.withTransaction { connection in
            try await connection.query("SELECT receipts.enter_tenant($1)", [tenant])
            return try await connection.query(
            """
            SELECT (SELECT count(*) FROM receipts.messages WHERE tenant_id = $1),
                   (SELECT count(*) FROM receipts.chat_members WHERE tenant_id = $1 AND user_id = 'b' AND read_seq = 5),
                   (SELECT count(*) FROM receipts.import_rows WHERE tenant_id = $1),
                   (SELECT count(*) FROM receipts.events WHERE tenant_id = $1 AND type = 'chat.imported')
            """, [tenant]
            ).first!.decode((Int, Int, Int, Int).self)
        }
        #expect(counts == (50, 10, 0, 10))
    }
}

extension Array where Element: Sendable {
    /// The elements as an `AsyncSequence`.
    var async: AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream()
        for element in self { continuation.yield(element) }
        continuation.finish()
        return stream
    }
}
