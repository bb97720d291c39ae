import Foundation
import Postgres
import ReceiptsCore

/// A message of a page (`ReceiptsStore.messages`), its receipts as the database sent them.
///
/// A page of a 1,000-member group's messages holds some 100,000 user ids in its
/// `deliveredTo` and `readBy` lists; they are counted (`ReceiptRules.summary(of:…)`) and
/// written out as JSON straight from the result's bytes, without a `String` for each
/// (`UserIdList`). A page shows no delivery times and no hidden reads, so they are not read.
public struct ListedMessage: Sendable {
    public let id: String
    public let chatId: String
    public let senderId: String
    public let text: String
    public let createdAt: Date
    public let receipts: ListedReceipts

    public var seq: Int64 { self.receipts.seq }

    /// A message from its row (`MessageRecord.columns`) and its receipt chunks, in chunk order.
    init(row: PostgresRow, chatId: String, chunks: [ListedReceiptChunk]) throws {
        self.id = try row.decode(column: 0)
        self.chatId = chatId
        self.senderId = try row.decode(column: 2)
        self.text = try row.decode(column: 3)
        self.createdAt = try row.decode(column: 4)
        self.receipts = ListedReceipts(seq: try row.decode(Int64.self, column: 1), senderId: self.senderId, chunks: chunks)
    }
}

/// A listed message's deliveries and visible reads: its receipt chunks' arrays one after
/// another, in chunk order (the order `ReceiptChunk` describes).
public struct ListedReceipts: ReceiptLists, Sendable {
    public let seq: Int64
    public let senderId: String
    let chunks: [ListedReceiptChunk]

    /// `delivered_to`: who it was delivered to.
    public var deliveredTo: UserIdList { UserIdList(self.chunks.map(\.deliveredTo)) }

    /// `read_by`: who visibly read it.
    public var readBy: UserIdList { UserIdList(self.chunks.map(\.readBy)) }

    public func forEachDelivery(_ body: (UnsafeRawBufferPointer) -> Void) {
        for chunk in self.chunks {
            chunk.deliveredTo.forEach(body)
        }
    }

    public func forEachVisibleRead(_ body: (UnsafeRawBufferPointer, Date) -> Void) {
        for chunk in self.chunks {
            var times = chunk.readAt.makeIterator()
            // As many times as readers: checked when the chunk was read.
            chunk.readBy.forEach { body($0, times.next()!) }
        }
    }
}

/// User ids as the database sent them: the elements of one text array after another.
public struct UserIdList: Sendable {
    private let arrays: [PostgresTextElements]

    init(_ arrays: [PostgresTextElements]) {
        self.arrays = arrays
    }

    /// How many ids there are.
    public var count: Int { self.arrays.reduce(0) { $0 + $1.count } }

    /// Calls `body` with each id's UTF-8 bytes, in order; they are valid only during the call.
    public func forEach(_ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        for array in self.arrays {
            try array.forEach(body)
        }
    }

    /// The ids as `String`s.
    public var strings: [String] { self.arrays.flatMap(\.strings) }
}

/// One row of `receipts.receipt_chunks` as a page reads it: who has the message and who
/// visibly read it when, among the members of one chunk.
struct ListedReceiptChunk: Sendable {
    let seq: Int64
    let chunk: Int32
    let deliveredTo: PostgresTextElements
    let readBy: PostgresTextElements
    let readAt: [Date]

    /// The statement that reads the chunks of a chat's messages with `$3 <= seq <= $4`, in
    /// no order (sorting them was slower in PostgreSQL than here; see `ReceiptChunk.sql`).
    static let sql = """
        SELECT seq, chunk, delivered_to, read_by, read_at FROM receipts.receipt_chunks
        WHERE tenant_id = $1 AND chat_id = $2 AND seq >= $3 AND seq <= $4
        """

    init(row: PostgresRow) throws {
        self.seq = try row.decode(column: 0)
        self.chunk = try row.decode(column: 1)
        self.deliveredTo = try row.decode(column: 2)
        self.readBy = try row.decode(column: 3)
        self.readAt = try row.decode(column: 4)
        guard self.readBy.count == self.readAt.count else { throw unequalArrays(seq: self.seq) }
    }
}
