import Foundation
import Postgres
import ReceiptsCore

/// A message with its receipts, as stored.
public struct MessageRecord: Sendable {
    public let id: String
    public let chatId: String
    public let senderId: String
    public let text: String
    public let createdAt: Date
    /// Everything the receipt rules need (seq, sender, deliveries, reads).
    public let receipts: MessageReceipts

    public var seq: Int64 { self.receipts.seq }
}

extension MessageRecord {
    /// The columns of `receipts.messages` that `init(row:chatId:chunks:)` reads, in order.
    static let columns = "message_id, seq, sender_id, body, created_at"

    /// A message from its row and the rows of its receipt chunks (`ReceiptChunk`), in chunk order.
    init(row: PostgresRow, chatId: String, chunks: some Collection<ReceiptChunk>) throws {
        self.id = try row.decode(column: 0)
        self.chatId = chatId
        self.senderId = try row.decode(column: 2)
        self.text = try row.decode(column: 3)
        self.createdAt = try row.decode(column: 4)
        self.receipts = MessageReceipts(
            seq: try row.decode(Int64.self, column: 1),
            senderId: self.senderId,
            deliveredTo: chunks.flatMap(\.deliveredTo),
            deliveredAt: chunks.flatMap(\.deliveredAt),
            visibleReads: chunks.flatMap(\.visibleReads),
            hiddenReaders: Set(chunks.flatMap(\.hiddenReaders))
        )
    }
}

/// One row of `receipts.receipt_chunks`: a message's receipts by the members of one chunk
/// of 32 (`sql/migrations/0001_baseline.sql`).
///
/// A message's receipts are its chunks' arrays one after another, in chunk order: each
/// chunk in the order its receipts were appended, the chunks in the order of their members'
/// numbers (the order they joined). A group of up to 32 members has one chunk, so its lists
/// are in the order the receipts happened, as they were before chunks; a larger group's are
/// not merged by time, which would need every receipt's time where a page shows none.
struct ReceiptChunk: Sendable {
    let seq: Int64
    let chunk: Int32
    let deliveredTo: [String]
    let deliveredAt: [Date]
    let visibleReads: [UserReceipt]
    let hiddenReaders: [String]

    /// The statement that reads the chunks of one message (`$3`), in no order (the table
    /// straight: the transaction is already scoped to the tenant, and a set-returning function
    /// would copy every row once more).
    static let sql = """
        SELECT seq, chunk, delivered_to, read_by, read_at, hidden_read_by, delivered_at FROM receipts.receipt_chunks
        WHERE tenant_id = $1 AND chat_id = $2 AND seq = $3
        """

    init(row: PostgresRow) throws {
        self.seq = try row.decode(column: 0)
        self.chunk = try row.decode(column: 1)
        self.deliveredTo = try row.decode([String].self, column: 2)
        let readBy = try row.decode([String].self, column: 3)
        let readAt = try row.decode([Date].self, column: 4)
        guard readBy.count == readAt.count else { throw unequalArrays(seq: self.seq) }
        self.visibleReads = zip(readBy, readAt).map { UserReceipt(userId: $0, at: $1) }
        self.hiddenReaders = try row.decode([String].self, column: 5)
        self.deliveredAt = try row.decode([Date].self, column: 6)
        guard self.deliveredAt.count == self.deliveredTo.count else { throw unequalArrays(seq: self.seq) }
    }
}

/// Parallel arrays of different lengths: the table's checks keep them equal, so this is
/// a fault to report, never receipts to pair up by guessing.
func unequalArrays(seq: Int64) -> PostgresError {
    PostgresError(code: .invalidValue, message: "receipt chunk of message \(seq): parallel arrays of different lengths")
}
