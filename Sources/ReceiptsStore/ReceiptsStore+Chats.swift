import Foundation
import Postgres
import ReceiptsCore

extension ReceiptsStore {
    /// Creates a chat with `members`, or confirms that it exists with that kind and those
    /// current members.
    public func putChat(tenant: String, chat: String, kind: ChatKind, members: [String]) async throws -> PutChatOutcome {
        let rows = try await self.query("SELECT receipts.put_chat(\(tenant), \(chat), \(kind.rawValue), \(members))")
        return try Self.outcome(PutChatOutcome.self, from: rows)
    }

    /// The chat and its current members, or nil when the tenant has no such chat.
    public func chat(tenant: String, chat: String) async throws -> ChatRecord? {
        try await self.withTenant(tenant, readOnly: true) { connection in
            try await Self.chat(tenant: tenant, chat: chat, on: connection)
        }
    }

    /// Adds `user` to a group chat.
    public func join(tenant: String, chat: String, user: String) async throws -> JoinOutcome {
        let rows = try await self.write("SELECT receipts.join_chat(\(tenant), \(chat), \(user))")
        return try Self.outcome(JoinOutcome.self, from: rows)
    }

    /// Ends `user`'s membership of a chat.
    public func leave(tenant: String, chat: String, user: String) async throws -> LeaveOutcome {
        let rows = try await self.write("SELECT receipts.leave_chat(\(tenant), \(chat), \(user))")
        return try Self.outcome(LeaveOutcome.self, from: rows)
    }

    /// The chat's kind and every membership period, past and present, for the receipt rules;
    /// nil when there is no such chat.
    static func roster(tenant: String, chat: String, on connection: PostgresConnection) async throws -> ChatRoster? {
        let kindRows = try await connection.query(
            "SELECT kind FROM receipts.chats WHERE tenant_id = \(tenant) AND chat_id = \(chat)"
        )
        guard let kindRow = kindRows.first, let kind = ChatKind(rawValue: try kindRow.decode(String.self, column: "kind")) else { return nil }
        // A current member is one whose last period is still open (until_seq null), so the
        // periods alone tell it: no join with chat_members, whose plan a database not yet
        // analyzed got wrong (a walk of the chat's members for each period: a GET in a group
        // of 1,000 took over 100 ms until the first ANALYZE).
        let rows = try await connection.query(
            """
            SELECT period.user_id, period.after_seq, period.until_seq, period.until_seq IS NULL
            FROM receipts.membership_periods AS period
            WHERE period.tenant_id = \(tenant) AND period.chat_id = \(chat)
            """
        )
        var periods: [MembershipPeriod] = []
        var currentMembers: Set<String> = []
        for row in rows {
            let (user, afterSeq, untilSeq, isMember) = try row.decode((String, Int64, Int64?, Bool).self)
            periods.append(MembershipPeriod(userId: user, afterSeq: afterSeq, untilSeq: untilSeq))
            if isMember { currentMembers.insert(user) }
        }
        return ChatRoster(kind: kind, periods: periods, currentMembers: currentMembers)
    }

    static func chat(tenant: String, chat: String, on connection: PostgresConnection) async throws -> ChatRecord? {
        let rows = try await connection.query(
            """
            SELECT chat.kind, chat.created_at, member.user_id, member.joined_at
            FROM receipts.chats AS chat
            LEFT JOIN receipts.chat_members AS member
                ON member.tenant_id = chat.tenant_id AND member.chat_id = chat.chat_id AND member.left_at IS NULL
            WHERE chat.tenant_id = \(tenant) AND chat.chat_id = \(chat)
            ORDER BY member.user_id
            """
        )
        // One row per current member (none for a chat without one), each with the chat's columns.
        let decoded = try rows.decode((String, Date, String?, Date?).self)
        guard let (kindText, createdAt, _, _) = decoded.first, let kind = ChatKind(rawValue: kindText) else { return nil }
        let members = decoded.compactMap { _, _, user, joinedAt in
            user.flatMap { user in joinedAt.map { ChatRecord.Member(userId: user, joinedAt: $0) } }
        }
        return ChatRecord(id: chat, kind: kind, createdAt: createdAt, members: members)
    }

    /// Reads the text outcome a receipts.* function returns in its first column.
    static func outcome<Outcome: RawRepresentable>(_ type: Outcome.Type, from rows: PostgresRows) throws -> Outcome
    where Outcome.RawValue == String {
        try self.outcome(type, text: rows.scalar(String.self), function: "receipts.*")
    }

    /// Reads the text outcome in the first column of one row of `function`'s answer.
    static func outcome<Outcome: RawRepresentable>(_ type: Outcome.Type, of row: PostgresRow, function: String) throws -> Outcome
    where Outcome.RawValue == String {
        try self.outcome(type, text: row.decode(String.self, column: "outcome"), function: function)
    }

    private static func outcome<Outcome: RawRepresentable>(_ type: Outcome.Type, text: String, function: String) throws -> Outcome
    where Outcome.RawValue == String {
        guard let outcome = Outcome(rawValue: text) else {
            throw UnexpectedOutcome(function: function, outcome: text)
        }
        return outcome
    }
}
