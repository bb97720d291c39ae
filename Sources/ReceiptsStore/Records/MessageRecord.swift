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
/// (`receipts.receipt_chunks` in `sql/migrations/0001_baseline.sql`).
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
    /// of a message kept them before chunks: by time, ties in chunk order, then in their order
    /// in the chunk. Each chunk is appended in the order of time, so the chunks are merged
    /// pairwise (O(n log chunks), the left one first on ties, which is that same order); a
    /// chunk out of order (two readers whose transactions committed in the other order than
    /// they started) is sorted instead.
    static func inOrderOfTime(_ chunks: [[UserReceipt]]) -> [UserReceipt] {
        var runs = chunks.filter { !$0.isEmpty }
        guard runs.count > 1 else { return runs.first ?? [] }
        guard runs.allSatisfy({ zip($0, $0.dropFirst()).allSatisfy { $0.at <= $1.at } }) else {
            return runs.enumerated()
                .flatMap { chunk, receipts in receipts.enumerated().map { (chunk: chunk, position: $0.offset, receipt: $0.element) } }
                .sorted { ($0.receipt.at, $0.chunk, $0.position) < ($1.receipt.at, $1.chunk, $1.position) }
                .map(\.receipt)
        }
        while runs.count > 1 {
            runs = stride(from: 0, to: runs.count, by: 2).map { index in
                index + 1 < runs.count ? merged(runs[index], runs[index + 1]) : runs[index]
            }
        }
        return runs[0]
    }

    /// Two lists in the order of time as one, `earlier` first on ties.
    private static func merged(_ earlier: [UserReceipt], _ later: [UserReceipt]) -> [UserReceipt] {
        var result: [UserReceipt] = []
        result.reserveCapacity(earlier.count + later.count)
        var left = earlier.startIndex
        var right = later.startIndex
        while left < earlier.endIndex && right < later.endIndex {
            if later[right].at < earlier[left].at {
                result.append(later[right])
                right += 1
            } else {
                result.append(earlier[left])
                left += 1
            }
        }
        result.append(contentsOf: earlier[left...])
        result.append(contentsOf: later[right...])
        return result
    }
}
