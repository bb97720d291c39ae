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
            deliveries: ReceiptChunk.inOrderOfTime(chunks.map(\.deliveries)),
            visibleReads: ReceiptChunk.inOrderOfTime(chunks.map(\.visibleReads)),
            hiddenReaders: Set(chunks.flatMap(\.hiddenReaders))
        )
    }
}

/// One row of `receipts.receipt_chunks_of`: a message's receipts by the members of one chunk
/// (`sql/migrations/0018_receipts_in_member_chunks.sql`).
struct ReceiptChunk: Sendable {
    let seq: Int64
    let deliveries: [UserReceipt]
    let visibleReads: [UserReceipt]
    let hiddenReaders: [String]

    /// The statement that reads the chunks of a chat's messages in a seq range, by seq and chunk.
    static let sql = """
        SELECT seq, delivered_to, delivered_at, read_by, read_at, hidden_read_by
        FROM receipts.receipt_chunks_of($1, $2, $3, $4)
        """

    init(row: PostgresRow) throws {
        self.seq = try row.decode(column: 0)
        let deliveredTo = try row.decode([String].self, column: 1)
        let deliveredAt = try row.decode([Date].self, column: 2)
        let readBy = try row.decode([String].self, column: 3)
        let readAt = try row.decode([Date].self, column: 4)
        self.deliveries = zip(deliveredTo, deliveredAt).map { UserReceipt(userId: $0, at: $1) }
        self.visibleReads = zip(readBy, readAt).map { UserReceipt(userId: $0, at: $1) }
        self.hiddenReaders = try row.decode([String].self, column: 5)
    }

    /// The receipts of all chunks as one list in the order they happened, as the single array
    /// of a message kept them before chunks: each chunk is in that order already, so one
    /// chunk is returned as it is and several are merged by time (ties in chunk order).
    static func inOrderOfTime(_ chunks: [[UserReceipt]]) -> [UserReceipt] {
        let filled = chunks.filter { !$0.isEmpty }
        guard filled.count > 1 else { return filled.first ?? [] }
        return filled.enumerated()
            .flatMap { chunk, receipts in receipts.enumerated().map { (chunk: chunk, position: $0.offset, receipt: $0.element) } }
            .sorted { ($0.receipt.at, $0.chunk, $0.position) < ($1.receipt.at, $1.chunk, $1.position) }
            .map(\.receipt)
    }
}
