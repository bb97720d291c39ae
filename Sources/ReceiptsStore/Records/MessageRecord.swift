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
        let withTimes = chunks.allSatisfy { $0.deliveredAt != nil }
        self.receipts = MessageReceipts(
            seq: try row.decode(Int64.self, column: 1),
            senderId: self.senderId,
            deliveredTo: chunks.flatMap(\.deliveredTo),
            deliveredAt: withTimes ? chunks.flatMap { $0.deliveredAt ?? [] } : nil,
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
    /// `nil` when read without the delivery times (`Columns.withoutDeliveryTimes`).
    let deliveredAt: [Date]?
    let visibleReads: [UserReceipt]
    let hiddenReaders: [String]

    /// Which columns to read: the delivery times only where they are shown (a message's
    /// `recipients`). On a page of a large group they would be a quarter of the values
    /// PostgreSQL sends and the service decodes, for nothing.
    enum Columns {
        case withDeliveryTimes
        case withoutDeliveryTimes

        /// The statement that reads the chunks of a chat's messages with `$3 <= seq <= $4`, in
        /// no order (the table straight: the transaction is already scoped to the tenant, and
        /// a set-returning function would copy every row once more).
        var sql: String {
            switch self {
            case .withDeliveryTimes:
                """
                SELECT seq, chunk, delivered_to, read_by, read_at, hidden_read_by, delivered_at FROM receipts.receipt_chunks
                WHERE tenant_id = $1 AND chat_id = $2 AND seq >= $3 AND seq <= $4
                """
            case .withoutDeliveryTimes:
                """
                SELECT seq, chunk, delivered_to, read_by, read_at, hidden_read_by FROM receipts.receipt_chunks
                WHERE tenant_id = $1 AND chat_id = $2 AND seq >= $3 AND seq <= $4
                """
            }
        }
    }

    init(row: PostgresRow, columns: Columns) throws {
        self.seq = try row.decode(column: 0)
        self.chunk = try row.decode(column: 1)
        self.deliveredTo = try row.decode([String].self, column: 2)
        let readBy = try row.decode([String].self, column: 3)
        let readAt = try row.decode([Date].self, column: 4)
        guard readBy.count == readAt.count else { throw Self.unequalArrays(seq: self.seq) }
        self.visibleReads = zip(readBy, readAt).map { UserReceipt(userId: $0, at: $1) }
        self.hiddenReaders = try row.decode([String].self, column: 5)
        switch columns {
        case .withDeliveryTimes:
            let deliveredAt = try row.decode([Date].self, column: 6)
            guard deliveredAt.count == self.deliveredTo.count else { throw Self.unequalArrays(seq: self.seq) }
            self.deliveredAt = deliveredAt
        case .withoutDeliveryTimes:
            self.deliveredAt = nil
        }
    }

    /// Parallel arrays of different lengths: the table's checks keep them equal, so this is
    /// a fault to report, never receipts to pair up by guessing.
    private static func unequalArrays(seq: Int64) -> PostgresError {
        PostgresError(code: .invalidValue, message: "receipt chunk of message \(seq): parallel arrays of different lengths")
    }
}
