import Foundation
import Postgres
import ReceiptsCore

/// The receipt chunks of a page's messages as they arrive from the database, in no order:
/// kept for their lists, and taken into the tallies of the viewer's messages at once.
///
/// A page of a 1,000-member group's messages holds some 100,000 user ids: each is looked up
/// in the roster by its bytes (`UserNumbers`) and counted by number, without a `String`.
/// A page shows no delivery times and no hidden reads, so they are not read.
struct PageReceiptChunks: Sendable {
    private(set) var chunks: [Int64: [PageReceiptChunk]] = [:]
    /// By seq: the tallies of the viewer's messages.
    private(set) var tallies: [Int64: ReceiptTally]
    /// The roster's users by their bytes; nil when there is nothing to tally.
    private let numbers: UserNumbers?

    init(tallies: [Int64: ReceiptTally], roster: ChatRoster) {
        self.tallies = tallies
        self.numbers = tallies.isEmpty ? nil : UserNumbers(roster.numberedUsers)
    }

    mutating func add(_ chunk: PageReceiptChunk) {
        self.chunks[chunk.seq, default: []].append(chunk)
        // Taken out while it counts, so that its arrays are changed in place.
        guard let numbers, var tally = self.tallies.removeValue(forKey: chunk.seq) else { return }
        chunk.deliveredTo.forEach { user in
            if let number = numbers.number(of: user) { tally.delivered(toUserNumber: number) }
        }
        var times = chunk.readAt.makeIterator()
        // As many times as readers: checked when the chunk was read.
        chunk.readBy.forEach { user in
            let time = times.next()!
            if let number = numbers.number(of: user) { tally.read(byUserNumber: number, at: time) }
        }
        self.tallies[chunk.seq] = tally
    }

    /// The message of `row` with its chunks' lists, in chunk order (the order `ReceiptChunk`
    /// describes).
    func message(_ row: MessageRow, chat: String) -> MessageRecord {
        let chunks = (self.chunks[row.seq] ?? []).sorted { $0.chunk < $1.chunk }
        return row.record(
            chat: chat,
            deliveredTo: UserIdList(stored: chunks.map(\.deliveredTo), areIdentifiers: chunks.allSatisfy(\.deliveredToAreIdentifiers)),
            readBy: UserIdList(stored: chunks.map(\.readBy), areIdentifiers: chunks.allSatisfy(\.readByAreIdentifiers)))
    }
}

/// One row of `receipts.receipt_chunks` as a page reads it: who has the message and who
/// visibly read it when, among the members of one chunk.
struct PageReceiptChunk: Sendable {
    let seq: Int64
    let chunk: Int32
    let deliveredTo: PostgresTextElements
    let readBy: PostgresTextElements
    let readAt: [Date]
    /// Whether every id of `deliveredTo` and of `readBy` is a valid id (`UserIdList.areStoredIdentifiers`).
    let deliveredToAreIdentifiers: Bool
    let readByAreIdentifiers: Bool

    /// The statement that reads the chunks of a chat's messages with `first <= seq <= last`,
    /// in no order (`ReceiptsStore.messages` says why).
    /// The chunk rows of the messages `seqs` (ascending): one range when they follow each
    /// other (a chat without threads), else those seqs alone, so that a page of the main
    /// timeline never reads the replies between its messages (nor a thread's page the main
    /// messages between its replies).
    static func select(tenant: String, chat: String, seqs: [Int64]) -> PostgresQuery {
        let first = seqs.first ?? 0
        let last = seqs.last ?? -1
        if last - first + 1 == Int64(seqs.count) {
            return """
                SELECT seq, chunk, delivered_to, read_by, read_at FROM receipts.receipt_chunks
                WHERE tenant_id = \(tenant) AND chat_id = \(chat) AND seq >= \(first) AND seq <= \(last)
                """
        }
        return """
            SELECT seq, chunk, delivered_to, read_by, read_at FROM receipts.receipt_chunks
            WHERE tenant_id = \(tenant) AND chat_id = \(chat) AND seq = ANY (\(seqs))
            """
    }

    init(row: PostgresRow) throws {
        (self.seq, self.chunk, self.deliveredTo, self.readBy, self.readAt) =
            try row.decode((Int64, Int32, PostgresTextElements, PostgresTextElements, [Date]).self)
        guard self.readBy.count == self.readAt.count else { throw unequalArrays(seq: self.seq) }
        self.deliveredToAreIdentifiers = Self.areIdentifiers(self.deliveredTo)
        self.readByAreIdentifiers = Self.areIdentifiers(self.readBy)
    }

    private static func areIdentifiers(_ ids: PostgresTextElements) -> Bool {
        var areIdentifiers = true
        ids.forEach { if areIdentifiers && !Identifier.isValid(utf8: $0) { areIdentifiers = false } }
        return areIdentifiers
    }
}
