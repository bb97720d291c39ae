import Postgres

extension ReceiptsStore {
    /// Marks messages read by `user`; returns how many changed and the user's new unread
    /// count in the chat.
    public func markRead(tenant: String, chat: String, user: String, target: MarkTarget) async throws -> Result<(marked: Int, unreadCount: Int), MarkFailure> {
        let (ids, upTo) = target.parameters
        let rows = try await self.write(
            "SELECT outcome, marked, unread_count FROM receipts.mark_read($1, $2, $3, $4, $5)",
            [tenant, chat, user, ids, upTo]
        )
        let row = rows[0]
        if let failure = MarkFailure(rawValue: try row.decode(column: 0)) { return .failure(failure) }
        return .success((try row.decode(Int.self, column: 1), try row.decode(Int.self, column: 2)))
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
