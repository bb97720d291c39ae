import Logging
import Postgres

/// What marking messages read answers: how many changed and the reader's new unread count.
typealias MarkReadOutcome = Result<(marked: Int, unreadCount: Int), MarkFailure>

/// One user's read in one chat: a request of a `receipts.mark_read_each` batch.
struct ReadRequest: Sendable {
    let chat: String
    let user: String
    let target: MarkTarget
    let scope: MarkScope
}

extension ReceiptsStore {
    /// Marks messages read by `user`; returns how many changed and the user's new unread
    /// count in the chat.
    ///
    /// Every read goes through `reads`, which marks a tenant's concurrent reads together in
    /// one call of `receipts.mark_read_each` (a read that finds the tenant idle is a batch of
    /// one, at once).
    /// `scope` limits a read up to a message, or of all, to the main timeline or a thread.
    public func markRead(
        tenant: String, chat: String, user: String, target: MarkTarget, scope: MarkScope = .wholeChat
    ) async throws -> Result<(marked: Int, unreadCount: Int), MarkFailure> {
        try await self.reads.submit(ReadRequest(chat: chat, user: user, target: target, scope: scope), tenant: tenant) { tenant, queue in
            try await self.runBatches(of: "reads", tenant: tenant, from: queue, Self.readStatements)
        }
    }

    /// Reads: a batch of one request is one `receipts.mark_read` call (a few small statements:
    /// about half what the set-based statement costs PostgreSQL for one request, and most
    /// batches are of one when the service is not busy); a larger batch is one
    /// `receipts.mark_read_each` call, its items the requests' messages (one item per message
    /// id; one item with `through` for a read up to a message or of all). One answer row per
    /// request, in order. Both are made of the same SQL rules (`sql/functions/marking.sql`),
    /// and `SingleReadBatchTests` holds them to the same answers.
    static let readStatements = BatchStatements<ReadRequest, MarkReadOutcome>(handsEventsOver: true) { tenant, requests in
        if requests.count == 1 {
            let request = requests[0]
            let (ids, upTo) = request.target.parameters
            return """
                SELECT outcome, marked, unread_count \
                FROM receipts.mark_read(\(tenant), \(request.chat), \(request.user), \(ids), \(upTo), \(request.scope.sqlValue))
                """
        }
        var chats: [String] = []
        var users: [String] = []
        var messages: [String?] = []
        var through: [Bool] = []
        var scopes: [String?] = []
        for request in requests {
            let items: [(message: String?, through: Bool)] = switch request.target {
            // An empty list is one item that names no message: the request is answered, and reads nothing.
            case .messages(let ids): ids.isEmpty ? [(nil, false)] : ids.map { ($0, false) }
            case .upTo(let id): [(id, true)]
            case .all: [(nil, true)]
            }
            for item in items {
                chats.append(request.chat)
                users.append(request.user)
                messages.append(item.message)
                through.append(item.through)
                scopes.append(item.through ? request.scope.sqlValue : nil)
            }
        }
        return """
            SELECT outcome, marked, unread_count FROM receipts.mark_read_each(\(tenant), \(chats), \(users), \(messages), \(through), \
            \(scopes))
            """
    } outcomes: { rows in
        try rows.map { try MarkReadOutcome(row: $0) }
    }

    /// Marks messages delivered to `user`; returns how many changed.
    public func markDelivered(
        tenant: String, chat: String, user: String, target: MarkTarget, scope: MarkScope = .wholeChat
    ) async throws -> Result<Int, MarkFailure> {
        let (ids, upTo) = target.parameters
        let rows = try await self.write(
            "SELECT outcome, marked FROM receipts.mark_delivered(\(tenant), \(chat), \(user), \(ids), \(upTo), \(scope.sqlValue))"
        )
        return try MarkFailure.outcome(of: rows[0], from: "receipts.mark_delivered").withSuccess { try rows[0].decode(Int.self, column: "marked") }
    }

    /// Marks the chat unread for `user` only; returns their unread count (at least 1).
    public func markUnread(tenant: String, chat: String, user: String) async throws -> Result<Int, MarkFailure> {
        let rows = try await self.write(
            "SELECT outcome, unread_count FROM receipts.mark_unread(\(tenant), \(chat), \(user))"
        )
        return try MarkFailure.outcome(of: rows[0], from: "receipts.mark_unread").withSuccess { try rows[0].decode(Int.self, column: "unread_count") }
    }

    /// The user's chats that have unread messages or are marked unread.
    public func unreadChats(tenant: String, user: String) async throws -> [UnreadChat] {
        let rows = try await self.query(
            "SELECT chat_id, unread_count, marked_unread, muted, mentions, threads FROM receipts.unread_counts(\(tenant), \(user))"
        )
        return try rows.map { row in
            let (chatId, unreadCount, markedUnread, muted, mentions, threads) = try row.decode((String, Int, Bool, Bool, Int, String?).self)
            return UnreadChat(
                chatId: chatId, unreadCount: unreadCount, markedUnread: markedUnread, muted: muted, mentions: mentions,
                threads: try threads.map(UnreadThread.list(json:)) ?? [])
        }
    }

    /// Mutes or unmutes `chat` for `user`, a current member.
    public func setChatMuted(tenant: String, chat: String, user: String, muted: Bool) async throws -> SetMutedOutcome {
        let rows = try await self.query("SELECT receipts.set_chat_muted(\(tenant), \(chat), \(user), \(muted))")
        return try Self.outcome(SetMutedOutcome.self, from: rows)
    }

    /// Turns the user's read receipts on or off.
    public func setReadReceipts(tenant: String, user: String, enabled: Bool) async throws {
        _ = try await self.query("SELECT receipts.set_read_receipts(\(tenant), \(user), \(enabled))")
    }
}

extension MarkReadOutcome {
    /// Reads an `outcome, marked, unread_count` row.
    init(row: PostgresRow) throws {
        self = try MarkFailure.outcome(of: row, from: "receipts.mark_read or mark_read_each").withSuccess {
            (try row.decode(Int.self, column: "marked"), try row.decode(Int.self, column: "unread_count"))
        }
    }
}

extension MarkFailure {
    /// The `outcome` of a marking function's row: success for `marked`, a failure
    /// for one of ours, and an `UnexpectedOutcome` error for anything else (a typo in SQL must
    /// be a 500 with a log line, never a silent 404).
    static func outcome(of row: PostgresRow, from function: String) throws -> Result<Void, MarkFailure> {
        let text = try row.decode(String.self, column: "outcome")
        if text == "marked" { return .success(()) }
        guard let failure = MarkFailure(rawValue: text) else { throw UnexpectedOutcome(function: function, outcome: text) }
        return .failure(failure)
    }
}

extension Result where Success == Void {
    /// The success mapped by a throwing transform, the failure kept.
    fileprivate func withSuccess<NewSuccess>(_ transform: () throws -> NewSuccess) throws -> Result<NewSuccess, Failure> {
        switch self {
        case .success: .success(try transform())
        case .failure(let failure): .failure(failure)
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
