import Postgres
import ReceiptsCore
import ReceiptsStore
import TestSupport
import Testing

/// Receipts of a group larger than one receipt chunk (32 members,
/// `receipts.receipt_chunks` in `sql/migrations/0001_baseline.sql`), written by many readers at once.
@Suite("Large groups")
struct LargeGroupTests {
    /// How a member reads the 20 messages.
    enum Way: CaseIterable {
        case ids, upTo, all, oneByOne
    }

    @Test("200 members reading the same 20 messages at once (ids, upTo, all, one by one): each reader once, counts exact, one event per request that changed something")
    func concurrentReaders() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "large")
        let readers = (0..<200).map { "r\($0)" }
        let hidden = Set(readers.filter { Int($0.dropFirst())! % 20 == 7 })  // 10 with read receipts off
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: ["sender"] + readers) == .created)
        let ids = (1...20).map { "m\($0)" }
        for id in ids { _ = try await store.sendMessage(tenant: tenant, chat: "g", id: id, sender: "sender", text: id) }
        for reader in hidden { try await store.setReadReceipts(tenant: tenant, user: reader, enabled: false) }

        func way(of reader: String) -> Way { Way.allCases[Int(reader.dropFirst())! % Way.allCases.count] }
        func targets(of reader: String) -> [MarkTarget] {
            switch way(of: reader) {
            case .ids: [.messages(ids)]
            case .upTo: [.upTo(ids.last!)]
            case .all: [.all]
            case .oneByOne: ids.map { .messages([$0]) }
            }
        }
        /// Every request of every reader at once; returns (reader, marked) per request.
        func readAll() async throws -> [(String, Int)] {
            try await withThrowingTaskGroup(of: (String, Int).self) { group in
                for reader in readers {
                    for target in targets(of: reader) {
                        group.addTask {
                            switch try await store.markRead(tenant: tenant, chat: "g", user: reader, target: target) {
                            case .success(let outcome): return (reader, outcome.marked)
                            case .failure(let failure): throw failure
                            }
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }

        let first = try await readAll()
        let markedBy = Dictionary(first.map { ($0.0, $0.1) }, uniquingKeysWith: +)
        #expect(readers.allSatisfy { markedBy[$0] == 20 }, "\(markedBy.filter { $0.value != 20 })")
        // Again: nothing changes, and no event says otherwise.
        let eventsBefore = try await Self.receiptEvents(of: tenant)
        let second = try await readAll()
        #expect(second.allSatisfy { $0.1 == 0 })

        for id in ids {
            let readBy = try await TestDatabase.pool.query(
                """
                SELECT coalesce(array_agg(reader ORDER BY reader), '{}') FROM receipts.receipt_chunks AS receipt, unnest(receipt.read_by) AS reader
                WHERE receipt.tenant_id = $1 AND receipt.chat_id = 'g' AND receipt.message_id = $2
                """, [tenant, id]).scalar([String].self)
            #expect(readBy == readers.filter { !hidden.contains($0) }.sorted(), "\(id)")
            let hiddenBy = try await TestDatabase.pool.query(
                """
                SELECT coalesce(array_agg(reader ORDER BY reader), '{}') FROM receipts.receipt_chunks AS receipt, unnest(receipt.hidden_read_by) AS reader
                WHERE receipt.tenant_id = $1 AND receipt.chat_id = 'g' AND receipt.message_id = $2
                """, [tenant, id]).scalar([String].self)
            #expect(hiddenBy == hidden.sorted(), "\(id)")

            let found = try #require(try await store.message(tenant: tenant, chat: "g", id: id, viewer: "sender"))
            let (message, roster) = (found.message, found.roster)
            #expect(found.receipts.visibleReads.count == 190)
            #expect(Set(message.readBy.strings).count == 190)
            #expect(Set(found.receipts.deliveries.map(\.userId)) == Set(readers))
            let summary = ReceiptRules.summary(of: found.receipts, in: roster, isViewersMostRecent: false)
            #expect(summary.recipients == 200 && summary.delivered == 200 && summary.read == 190)
            #expect(ReceiptRules.recipientStatuses(of: found.receipts, in: roster).filter { $0.readAt != nil }.count == 190)
        }
        for reader in readers {
            #expect(try await TestDatabase.pool.query("SELECT receipts.unread_count($1, 'g', $2)::int8", [tenant, reader]).scalar(Int.self) == 0)
        }

        // One event per request that read something, listing what it read: receipt.read, or
        // for a hidden reader the delivery that came with the read (deliveries stay visible);
        // none for the repeats.
        let events = try await Self.receiptEvents(of: tenant)
        #expect(events == eventsBefore)
        for reader in readers {
            let mine = events.filter { $0.user == reader }
            let type = hidden.contains(reader) ? "receipt.delivered" : "receipt.read"
            #expect(mine.allSatisfy { $0.type == type }, "\(reader)")
            let requestsThatRead = first.filter { $0.0 == reader && $0.1 > 0 }.count
            #expect(mine.count == requestsThatRead, "\(reader): \(mine.count) events, \(requestsThatRead) requests")
            #expect(mine.flatMap(\.messages).sorted() == ids.sorted(), "\(reader)")
        }
        await pool.close()
    }

    struct ReceiptEvent: Equatable {
        var type: String
        var user: String
        var messages: [String]
    }

    static func receiptEvents(of tenant: String) async throws -> [ReceiptEvent] {
        try await TestDatabase.pool.query(
            """
            SELECT type, user_id, message_ids FROM receipts.events
            WHERE tenant_id = $1 AND type LIKE 'receipt.%' ORDER BY event_id
            """, [tenant]
        ).map { ReceiptEvent(type: try $0.decode(column: 0), user: try $0.decode(column: 1), messages: try $0.decode(column: 2)) }
    }
}
