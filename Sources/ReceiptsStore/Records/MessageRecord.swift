import Foundation
import Postgres
import ReceiptsCore

/// A message as stored, with who has it and who visibly read it: what the API shows of any
/// message, one of a page or one alone.
public struct MessageRecord: Sendable {
    public let id: String
    public let chatId: String
    /// Its position in its chat.
    public let seq: Int64
    public let senderId: String
    public let text: String
    /// The root of the thread it replies in; nil on the main timeline.
    public let threadId: String?
    /// For a root: its thread's summary.
    public let thread: ThreadSummary?
    /// The members it mentioned when it was sent (every one but the sender when it mentioned all).
    public let mentions: [String]
    public let createdAt: Date
    /// When its text was last changed by an edit; nil while it is as sent.
    public let editedAt: Date?
    /// `delivered_to`: who it was delivered to, in the stored order (`ReceiptChunk`).
    public let deliveredTo: UserIdList
    /// `read_by`: who visibly read it, in the stored order.
    public let readBy: UserIdList

    public init(
        id: String, chatId: String, seq: Int64, senderId: String, text: String, threadId: String? = nil,
        thread: ThreadSummary? = nil, mentions: [String] = [], createdAt: Date, editedAt: Date? = nil,
        deliveredTo: UserIdList = UserIdList([]), readBy: UserIdList = UserIdList([])
    ) {
        self.id = id
        self.chatId = chatId
        self.seq = seq
        self.senderId = senderId
        self.text = text
        self.threadId = threadId
        self.thread = thread
        self.mentions = mentions
        self.createdAt = createdAt
        self.editedAt = editedAt
        self.deliveredTo = deliveredTo
        self.readBy = readBy
    }
}

/// A thread's summary, shown on its root (`receipts.threads`).
public struct ThreadSummary: Sendable, Hashable {
    public let replies: Int
    public let lastReplyAt: Date
}

/// A row of `receipts.messages` with its thread's summary (`MessageRow.select…`), before its
/// receipts are read.
struct MessageRow: Sendable {
    let id: String
    let seq: Int64
    let senderId: String
    let text: String
    let createdAt: Date
    let editedAt: Date?
    /// The members it named; for one that mentioned all, every member it was sent to, once
    /// `withEveryoneMentioned` has read them.
    var mentions: [String]
    let mentionsAll: Bool
    let threadId: String?
    let thread: ThreadSummary?

    /// Reads `message_id, seq, sender_id, body, created_at, edited_at, mentions, mentions_all,
    /// thread_id, replies, last_reply_at` (the last two from `receipts.threads`, null but for
    /// a root whose thread has replies).
    init(row: PostgresRow) throws {
        let replies: Int?, lastReplyAt: Date?
        (self.id, self.seq, self.senderId, self.text, self.createdAt, self.editedAt, self.mentions, self.mentionsAll, self.threadId,
         replies, lastReplyAt) = try row.decode((String, Int64, String, String, Date, Date?, [String], Bool, String?, Int?, Date?).self)
        if let replies, replies > 0, let lastReplyAt {
            self.thread = ThreadSummary(replies: replies, lastReplyAt: lastReplyAt)
        } else {
            self.thread = nil
        }
    }

    /// The message in `chat`, with its lists.
    func record(chat: String, deliveredTo: UserIdList, readBy: UserIdList) -> MessageRecord {
        MessageRecord(
            id: self.id, chatId: chat, seq: self.seq, senderId: self.senderId, text: self.text, threadId: self.threadId,
            thread: self.thread, mentions: self.mentions, createdAt: self.createdAt, editedAt: self.editedAt,
            deliveredTo: deliveredTo, readBy: readBy)
    }

    /// `rows` with every member mentioned by those that mentioned all (`receipts.mentions`,
    /// one query for them all; none when no row did).
    static func withEveryoneMentioned(
        _ rows: [MessageRow], tenant: String, chat: String, on connection: PostgresConnection
    ) async throws -> [MessageRow] {
        let seqs = rows.filter(\.mentionsAll).map(\.seq)
        guard !seqs.isEmpty else { return rows }
        var mentioned: [Int64: [String]] = [:]
        let found = try await connection.query(
            """
            SELECT seq, user_id FROM receipts.mentions
            WHERE tenant_id = \(tenant) AND chat_id = \(chat) AND seq = ANY (\(seqs)) ORDER BY seq, user_id
            """)
        for row in found {
            let (seq, user) = try row.decode((Int64, String).self)
            mentioned[seq, default: []].append(user)
        }
        return rows.map { row in
            var row = row
            if row.mentionsAll { row.mentions = mentioned[row.seq] ?? [] }
            return row
        }
    }
}

/// One message found with everything its sender's view needs (`ReceiptsStore.message`).
public struct FoundMessage: Sendable {
    public let message: MessageRecord
    /// Its receipts in full, delivery times and hidden reads included: what the receipt rules
    /// read (`ReceiptRules.recipientStatuses`, `ReceiptRules.summary`).
    public let receipts: MessageReceipts
    /// Its chat's roster.
    public let roster: ChatRoster
    /// Whether it is the viewer's newest message in the chat (false without a viewer).
    public let isViewersMostRecent: Bool
}

extension MessageReceipts {
    /// A message's receipts from the rows of its receipt chunks (`ReceiptChunk`), in chunk order.
    init(seq: Int64, senderId: String, chunks: some Collection<ReceiptChunk>) {
        self.init(
            seq: seq,
            senderId: senderId,
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
    let chunk: Int32
    let deliveredTo: [String]
    let deliveredAt: [Date]
    let visibleReads: [UserReceipt]
    let hiddenReaders: [String]

    /// The statement that reads the chunks of one message (`$3`), in no order (the table
    /// straight: the transaction is already scoped to the tenant, and a set-returning function
    /// would copy every row once more).
    static func select(tenant: String, chat: String, seq: Int64) -> PostgresQuery {
        """
        SELECT seq, chunk, delivered_to, read_by, read_at, hidden_read_by, delivered_at FROM receipts.receipt_chunks
        WHERE tenant_id = \(tenant) AND chat_id = \(chat) AND seq = \(seq)
        """
    }

    init(row: PostgresRow) throws {
        let seq: Int64, readBy: [String], readAt: [Date]
        (seq, self.chunk, self.deliveredTo, readBy, readAt, self.hiddenReaders, self.deliveredAt) =
            try row.decode((Int64, Int32, [String], [String], [Date], [String], [Date]).self)
        guard readBy.count == readAt.count, self.deliveredAt.count == self.deliveredTo.count else { throw unequalArrays(seq: seq) }
        self.visibleReads = zip(readBy, readAt).map { UserReceipt(userId: $0, at: $1) }
    }
}

/// Parallel arrays of different lengths: the table's checks keep them equal, so this is
/// a fault to report, never receipts to pair up by guessing.
func unequalArrays(seq: Int64) -> PostgresError {
    PostgresError(code: .invalidValue, message: "receipt chunk of message \(seq): parallel arrays of different lengths")
}
