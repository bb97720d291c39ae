import Logging
import Postgres

/// What marking messages read answers: how many changed and the reader's new unread count.
typealias MarkReadOutcome = Result<(marked: Int, unreadCount: Int), MarkFailure>

/// One message read by one user: a request of a `receipts.mark_read_each` batch.
struct SingleRead: Sendable {
    let chat: String
    let user: String
    let message: String
}

extension ReceiptsStore {
    /// Marks messages read by `user`; returns how many changed and the user's new unread
    /// count in the chat.
    ///
    /// A single message goes through `singleReads`, which marks concurrent ones together.
    public func markRead(tenant: String, chat: String, user: String, target: MarkTarget) async throws -> Result<(marked: Int, unreadCount: Int), MarkFailure> {
        if case .messages(let ids) = target, ids.count == 1 {
            return try await self.singleReads.submit(SingleRead(chat: chat, user: user, message: ids[0]), tenant: tenant) { tenant, queue in
                try await self.runBatches(of: "single reads", tenant: tenant, from: queue, Self.singleReadStatements)
            }
        }
        let (ids, upTo) = target.parameters
        return try await self.markReadNow(tenant: tenant, chat: chat, user: user, ids: ids, upTo: upTo)
    }

    /// Single reads: `receipts.mark_read` for one alone (the quicker of the two then), else
    /// `receipts.mark_read_each`; both answer `outcome, marked, unread_count` rows.
    static let singleReadStatements = BatchStatements<SingleRead, MarkReadOutcome> { tenant, reads in
        if reads.count == 1 {
            return (markReadSQL, [tenant, reads[0].chat, reads[0].user, [reads[0].message], String?.none])
        }
        return ("SELECT outcome, marked, unread_count FROM receipts.mark_read_each($1, $2, $3, $4)",
                [tenant, reads.map(\.chat), reads.map(\.user), reads.map(\.message)])
    } outcomes: { rows in
        try rows.map { try MarkReadOutcome(row: $0) }
    }

    /// One call of `receipts.mark_read`: alone, or as a batch of one single read.
    static let markReadSQL = "SELECT outcome, marked, unread_count FROM receipts.mark_read($1, $2, $3, $4, $5)"

    /// One call of `receipts.mark_read`.
    private func markReadNow(tenant: String, chat: String, user: String, ids: [String]?, upTo: String?) async throws -> MarkReadOutcome {
        let rows = try await self.write(Self.markReadSQL, [tenant, chat, user, ids, upTo])
        return try MarkReadOutcome(row: rows[0])
    }

    /// Marks messages delivered to `user`; returns how many changed.
    public func markDelivered(tenant: String, chat: String, user: String, target: MarkTarget) async throws -> Result<Int, MarkFailure> {
        let (ids, upTo) = target.parameters
        let rows = try await self.write(
            "SELECT outcome, marked FROM receipts.mark_delivered($1, $2, $3, $4, $5)",
            [tenant, chat, user, ids, upTo]
        )
        let row = rows[0]
        if let failure = MarkFailure(rawValue: try row.decode(column: 0)) { return .failure(failure) }
        return .success(try row.decode(Int.self, column: 1))
    }

    /// Marks the chat unread for `user` only; returns their unread count (at least 1).
    public func markUnread(tenant: String, chat: String, user: String) async throws -> Result<Int, MarkFailure> {
        let rows = try await self.write(
            "SELECT outcome, unread_count FROM receipts.mark_unread($1, $2, $3)",
            [tenant, chat, user]
        )
        let row = rows[0]
        if let failure = MarkFailure(rawValue: try row.decode(column: 0)) { return .failure(failure) }
        return .success(try row.decode(Int.self, column: 1))
    }

    /// The user's chats that have unread messages or are marked unread.
    public func unreadChats(tenant: String, user: String) async throws -> [UnreadChat] {
        let rows = try await self.query(
            "SELECT chat_id, unread_count, marked_unread FROM receipts.unread_counts($1, $2)",
            [tenant, user]
        )
        return try rows.map {
            UnreadChat(chatId: try $0.decode(column: 0), unreadCount: try $0.decode(column: 1), markedUnread: try $0.decode(column: 2))
        }
    }

    /// Turns the user's read receipts on or off.
    public func setReadReceipts(tenant: String, user: String, enabled: Bool) async throws {
        _ = try await self.query("SELECT receipts.set_read_receipts($1, $2, $3)", [tenant, user, enabled])
    }
}

extension MarkReadOutcome {
    /// Reads an `outcome, marked, unread_count` row.
    init(row: PostgresRow) throws {
        if let failure = MarkFailure(rawValue: try row.decode(column: 0)) {
            self = .failure(failure)
        } else {
            self = .success((try row.decode(Int.self, column: 1), try row.decode(Int.self, column: 2)))
        }
    }
}

extension MarkTarget {
    /// The `p_message_ids` and `p_up_to` arguments of the marking functions.
    fileprivate var parameters: ([String]?, String?) {
        switch self {
        case .messages(let ids): (ids, nil)
        case .upTo(let id): (nil, id)
        case .all: (nil, nil)
        }
    }
}
