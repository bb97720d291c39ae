import Postgres

/// What deleting a message did.
public enum DeleteMessageOutcome: String, Sendable {
    case deleted
    /// It was deleted before: nothing to do, as for a repeat.
    case alreadyDeleted = "already_deleted"
    /// No message of the chat ever had this id.
    case messageNotFound = "message_not_found"
    /// The caller may delete only their own messages, and this is someone else's.
    case notSender = "not_sender"
    case chatNotFound = "chat_not_found"
}

/// What deleting a chat did.
public enum DeleteChatOutcome: String, Sendable {
    case deleted
    case chatNotFound = "chat_not_found"
}

/// One message to delete: a request of a `receipts.delete_message_each` batch.
struct DeleteRequest: Sendable {
    let chat: String
    let message: String
    /// Delete only if they sent it; nil: whoever did.
    let sender: String?
}

extension ReceiptsStore {
    /// Deletes a message: counts, labels and rosters are right when this returns (see
    /// sql/functions/deleting.sql). `sender`: delete only if they sent it (a user token);
    /// nil: whoever sent it (the tenant key).
    ///
    /// Every delete goes through `deletes`, which deletes a tenant's concurrent deletes
    /// together, one transaction and one commit for all (a delete that finds the tenant idle
    /// is a batch of one, at once).
    public func deleteMessage(tenant: String, chat: String, id: String, sender: String?) async throws -> DeleteMessageOutcome {
        try await self.deletes.submit(DeleteRequest(chat: chat, message: id, sender: sender), tenant: tenant) { tenant, queue in
            try await self.runBatches(of: "deletes", tenant: tenant, from: queue, Self.deleteStatements)
        }
    }

    /// Deletes: one call of `receipts.delete_message_each`, whatever the number
    /// (`receipts.delete_message`, for psql, is a request of it). One outcome row per request,
    /// in order.
    static let deleteStatements = BatchStatements<DeleteRequest, DeleteMessageOutcome> { tenant, requests in
        "SELECT outcome FROM receipts.delete_message_each(\(tenant), \(requests.map(\.chat)), \(requests.map(\.message)), \(requests.map(\.sender)))"
    } outcomes: { rows in
        try rows.map { try Self.outcome(DeleteMessageOutcome.self, of: $0, function: "receipts.delete_message_each") }
    }

    /// Deletes a chat with its members at once; its messages are purged in the background
    /// (`purgeDeletedChats`), unreachable meanwhile.
    public func deleteChat(tenant: String, chat: String) async throws -> DeleteChatOutcome {
        let rows = try await self.write("SELECT receipts.delete_chat(\(tenant), \(chat))")
        return try Self.outcome(DeleteChatOutcome.self, from: rows)
    }

    /// One batch of the background purge of deleted chats' messages (any tenant's; at most
    /// `limit` messages of one chat, one transaction): how many it removed, nil when no
    /// deleted chat is left to purge (or every one is being purged by another instance).
    public func purgeDeletedChatBatch(limit: Int) async throws -> Int? {
        let rows = try await self.query("SELECT removed FROM receipts.purge_deleted_chat_batch(\(limit)::integer)")
        guard let row = rows.first else { return nil }
        return try row.decode(Int.self, column: "removed")
    }
}
