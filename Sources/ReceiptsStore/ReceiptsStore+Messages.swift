import Foundation
import Postgres
import ReceiptsCore

/// One message to send: a request of a `receipts.send_each` batch.
struct NewMessage: Sendable {
    let chat: String
    let id: String
    let sender: String
    let text: String
    /// The users it names (members but the sender are kept).
    let mentions: [String]
    /// It mentions every member.
    let mentionsAll: Bool
    /// The root of the thread it replies in; nil on the main timeline.
    let thread: String?
}

/// What `receipts.send_each` answered for one message.
enum SendResult: Sendable {
    case created(seq: Int64, createdAt: Date, mentions: [String])
    case existing
    case conflict
    case notMember
    case chatNotFound
    case threadNotFound
    case threadIsReply

    /// Reads an `outcome, seq, created_at, mentions` row; an outcome it does not know is an error.
    init(row: PostgresRow) throws {
        switch try row.decode((String, Int64?, Date?, [String]?).self) {
        case ("created", let seq?, let createdAt?, let mentions): self = .created(seq: seq, createdAt: createdAt, mentions: mentions ?? [])
        case ("existing", _, _, _): self = .existing
        case ("conflict", _, _, _): self = .conflict
        case ("not_member", _, _, _): self = .notMember
        case ("chat_not_found", _, _, _): self = .chatNotFound
        case ("thread_not_found", _, _, _): self = .threadNotFound
        case ("thread_is_reply", _, _, _): self = .threadIsReply
        case (let other, _, _, _): throw UnexpectedOutcome(function: "receipts.send_each", outcome: other)
        }
    }
}

/// A page of messages with what is needed to compute their receipts.
public struct MessagePage: Sendable {
    public let roster: ChatRoster
    /// Oldest first.
    public let messages: [MessageRecord]
    /// By seq: the receipts of the viewer's own messages, taken in as they arrived.
    let tallies: [Int64: ReceiptTally]
    /// The id of the viewer's newest message in the chat (for the `imessage` labels).
    public let viewersMostRecentMessageId: String?

    /// The receipts of `message` taken in for its `receipt`: only for the viewer's own messages.
    public func tally(of message: MessageRecord) -> ReceiptTally? {
        self.tallies[message.seq]
    }
}

/// Why a message page could not be read.
public enum MessagePageFailure: Error, Sendable {
    case chatNotFound
    case beforeNotFound
    /// The thread named is no root of the chat (no message, or a reply).
    case threadNotFound
}

extension ReceiptsStore {
    /// Sends a message, idempotently on its id, mentioning the members of `mentions` (but its
    /// sender), or every member with `mentionsAll`.
    ///
    /// Concurrent sends of a tenant go through `sends`, which sends them together.
    public func sendMessage(
        tenant: String, chat: String, id: String, sender: String, text: String, mentions: [String] = [], mentionsAll: Bool = false,
        thread: String? = nil
    ) async throws -> SendOutcome {
        let message = NewMessage(
            chat: chat, id: id, sender: sender, text: text, mentions: mentions, mentionsAll: mentionsAll, thread: thread)
        let result = try await self.sends.submit(message, tenant: tenant) { tenant, queue in
            try await self.runBatches(of: "sends", tenant: tenant, from: queue, Self.sendStatements)
        }
        switch result {
        case .created(let seq, let createdAt, let mentions):
            return .created(
                MessageRecord(
                    id: id, chatId: chat, seq: seq, senderId: sender, text: text, threadId: thread, mentions: mentions,
                    createdAt: createdAt))
        case .existing:
            guard let existing = try await self.message(tenant: tenant, chat: chat, id: id)?.message else { return .conflict }
            return .existing(existing)
        case .conflict: return .conflict
        case .notMember: return .senderNotMember
        case .chatNotFound: return .chatNotFound
        case .threadNotFound: return .threadNotFound
        case .threadIsReply: return .threadIsReply
        }
    }

    /// Sends: one call of `receipts.send_each` (one message per chat), whatever the number
    /// (`receipts.send_message`, for psql, is a request of it); `outcome, seq, created_at,
    /// mentions` rows, one per message, in order. Whom each names goes as two arrays side by
    /// side: the request's position (1-based) and the user.
    static let sendStatements = BatchStatements<NewMessage, SendResult> { tenant, messages in
        let named = messages.enumerated().flatMap { index, message in message.mentions.map { (Int32(index + 1), $0) } }
        return """
            SELECT outcome, seq, created_at, mentions FROM receipts.send_each(\(tenant), \(messages.map(\.chat)), \(messages.map(\.id)), \
            \(messages.map(\.sender)), \(messages.map(\.text)), \(messages.map(\.mentionsAll)), \(named.map(\.0)), \(named.map(\.1)), \
            \(messages.map(\.thread)))
            """
    } outcomes: { rows in
        try rows.map { try SendResult(row: $0) }
    }

    /// A page of messages, oldest first: the newest `limit` before `before` (or overall), of
    /// the main timeline, or of the thread of the root `thread`.
    public func messages(
        tenant: String,
        chat: String,
        before: String?,
        limit: Int,
        viewer: String?,
        thread: String? = nil
    ) async throws -> Result<MessagePage, MessagePageFailure> {
        try await self.withTenant(tenant, readOnly: true) { connection in
            guard let roster = try await Self.roster(tenant: tenant, chat: chat, on: connection) else {
                return .failure(.chatNotFound)
            }
            var beforeSeq = Int64.max
            if let before {
                let rows = try await connection.query(
                    "SELECT seq FROM receipts.message_by_id(\(tenant), \(chat), \(before))"
                )
                guard let row = rows.first else { return .failure(.beforeNotFound) }
                beforeSeq = try row.decode(Int64.self, column: "seq")
            }
            let page: PostgresQuery
            if let thread {
                let roots = try await connection.query(
                    """
                    SELECT thread_id FROM receipts.message_by_id(\(tenant), \(chat), \(thread))
                    """)
                guard let root = roots.first, root.isNull(column: 0) else { return .failure(.threadNotFound) }
                page = """
                    SELECT message.message_id, message.seq, message.sender_id, message.body, message.created_at, message.edited_at,
                           message.mentions, message.mentions_all, message.thread_id, NULL::integer, NULL::timestamptz
                    FROM receipts.messages AS message
                    WHERE message.tenant_id = \(tenant) AND message.chat_id = \(chat) AND message.thread_id = \(thread)
                      AND message.seq < \(beforeSeq)
                    ORDER BY message.seq DESC LIMIT \(limit)
                    """
            } else {
                page = """
                    SELECT message.message_id, message.seq, message.sender_id, message.body, message.created_at, message.edited_at,
                           message.mentions, message.mentions_all, message.thread_id, thread.replies, thread.last_reply_at
                    FROM receipts.messages AS message
                    LEFT JOIN receipts.threads AS thread
                        ON thread.tenant_id = message.tenant_id AND thread.chat_id = message.chat_id AND thread.root_seq = message.seq
                    WHERE message.tenant_id = \(tenant) AND message.chat_id = \(chat) AND message.thread_id IS NULL
                      AND message.seq < \(beforeSeq)
                    ORDER BY message.seq DESC LIMIT \(limit)
                    """
            }
            let found = try await connection.query(page).map { try MessageRow(row: $0) }
            let rows = try await MessageRow.withEveryoneMentioned(found, tenant: tenant, chat: chat, on: connection)
            var tallies: [Int64: ReceiptTally] = [:]
            for row in rows where row.senderId == viewer {
                tallies[row.seq] = ReceiptTally(seq: row.seq, senderId: row.senderId, in: roster)
            }
            var chunks = PageReceiptChunks(tallies: tallies, roster: roster)
            if !rows.isEmpty {
                // Row by row as they arrive: each chunk is counted while PostgreSQL sends the next.
                // In no order: PostgreSQL would sort the rows with their arrays (a page of a
                // 1,000-member group: 1,600 rows, 2.6 MB), which took it longer than finding them,
                // and could send none before it had them all.
                let select = PageReceiptChunk.select(tenant: tenant, chat: chat, seqs: rows.map(\.seq).reversed())
                chunks = try await connection.reduceRows(select, into: chunks) { chunks, row in
                    chunks.add(try PageReceiptChunk(row: row))
                }
            }
            let mostRecent = try await viewer.asyncMap { try await Self.mostRecentMessageId(tenant: tenant, chat: chat, sender: $0, on: connection) } ?? nil
            return .success(
                MessagePage(
                    roster: roster, messages: rows.reversed().map { chunks.message($0, chat: chat) }, tallies: chunks.tallies,
                    viewersMostRecentMessageId: mostRecent))
        }
    }

    /// One message with its chat's roster; nil when the chat or the message does not exist.
    public func message(tenant: String, chat: String, id: String, viewer: String? = nil) async throws -> FoundMessage? {
        try await self.withTenant(tenant, readOnly: true) { connection in
            guard let roster = try await Self.roster(tenant: tenant, chat: chat, on: connection) else { return nil }
            // By the key's index whatever the statistics, as receipts.message_by_id: the id as a
            // range of one value, ordered by it (with `=`, a generic plan that took the chat for
            // a row walked all of it through the seq index: 2.6 ms in a chat of 10,000).
            let rows = try await connection.query(
                """
                SELECT message.message_id, message.seq, message.sender_id, message.body, message.created_at, message.edited_at,
                       message.mentions, message.mentions_all, message.thread_id, thread.replies, thread.last_reply_at
                FROM receipts.messages AS message
                LEFT JOIN receipts.threads AS thread
                    ON thread.tenant_id = message.tenant_id AND thread.chat_id = message.chat_id AND thread.root_seq = message.seq
                WHERE message.tenant_id = \(tenant) AND message.chat_id = \(chat)
                  AND message.message_id >= \(id) AND message.message_id <= \(id)
                ORDER BY message.message_id
                LIMIT 1
                """
            )
            guard let found = try rows.first.map({ try MessageRow(row: $0) }) else { return nil }
            let row = try await MessageRow.withEveryoneMentioned([found], tenant: tenant, chat: chat, on: connection)[0]
            let chunks = try await connection.query(ReceiptChunk.select(tenant: tenant, chat: chat, seq: row.seq))
                .map { try ReceiptChunk(row: $0) }
                .sorted { $0.chunk < $1.chunk }
            let receipts = MessageReceipts(seq: row.seq, senderId: row.senderId, chunks: chunks)
            let message = row.record(
                chat: chat, deliveredTo: UserIdList(receipts.deliveredTo), readBy: UserIdList(receipts.visibleReads.map(\.userId)))
            var isMostRecent = false
            if let viewer {
                isMostRecent = try await Self.mostRecentMessageId(tenant: tenant, chat: chat, sender: viewer, on: connection) == id
            }
            return FoundMessage(message: message, receipts: receipts, roster: roster, isViewersMostRecent: isMostRecent)
        }
    }

    static func mostRecentMessageId(tenant: String, chat: String, sender: String, on connection: PostgresConnection) async throws -> String? {
        try await connection.query(
            """
            SELECT message_id FROM receipts.messages
            WHERE tenant_id = \(tenant) AND chat_id = \(chat) AND sender_id = \(sender)
            ORDER BY seq DESC LIMIT 1
            """
        ).first?.decode(String.self, column: "message_id")
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}

/// What an edit of a message's text did (`ReceiptsStore.editMessage`).
public enum EditMessageOutcome: Sendable {
    /// The text changed: the message as it is now.
    case edited(MessageRecord)
    /// It had this text already: nothing changed.
    case unchanged(MessageRecord)
    /// The editor may edit only their own messages, and this is someone else's.
    case notSender
    /// No message of the chat has this id (never sent, or deleted).
    case messageNotFound
    case chatNotFound
}

extension ReceiptsStore {
    /// Edits a message's text (`receipts.edit_message`): its receipts, counts and labels stay
    /// as they were. `editor`: only if they sent it (a user token); nil: whoever did.
    public func editMessage(tenant: String, chat: String, id: String, editor: String?, text: String) async throws -> EditMessageOutcome {
        let rows = try await self.write("SELECT outcome FROM receipts.edit_message(\(tenant), \(chat), \(id), \(editor), \(text))")
        let outcome = try rows.scalar(String.self)
        switch outcome {
        case "edited", "unchanged":
            // Deleted since (between the two transactions): as if it had been deleted first.
            guard let found = try await self.message(tenant: tenant, chat: chat, id: id) else { return .messageNotFound }
            return outcome == "edited" ? .edited(found.message) : .unchanged(found.message)
        case "not_sender": return .notSender
        case "message_not_found": return .messageNotFound
        case "chat_not_found": return .chatNotFound
        default: throw UnexpectedOutcome(function: "receipts.edit_message", outcome: outcome)
        }
    }
}
