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
    /// The columns `init(row:chatId:)` reads, in order.
    static let columns = """
        message_id, seq, sender_id, body, created_at,
        delivered_to, delivered_at, read_by, read_at, hidden_read_by
        """

    init(row: PostgresRow, chatId: String) throws {
        self.id = try row.decode(column: 0)
        self.chatId = chatId
        self.senderId = try row.decode(column: 2)
        self.text = try row.decode(column: 3)
        self.createdAt = try row.decode(column: 4)
        let deliveredTo = try row.decode([String].self, column: 5)
        let deliveredAt = try row.decode([Date].self, column: 6)
        let readBy = try row.decode([String].self, column: 7)
        let readAt = try row.decode([Date].self, column: 8)
        self.receipts = MessageReceipts(
            seq: try row.decode(Int64.self, column: 1),
            senderId: self.senderId,
            deliveries: zip(deliveredTo, deliveredAt).map { UserReceipt(userId: $0, at: $1) },
            visibleReads: zip(readBy, readAt).map { UserReceipt(userId: $0, at: $1) },
            hiddenReaders: Set(try row.decode([String].self, column: 9))
        )
    }
}
