import Foundation

// The face, continued: deleting (docs/api.md, "Deleting, erasing and credentials").

extension ReceiptsClient {
    /// Deletes a message: gone from listings and every unread count at once; its id stays
    /// taken. Deleting it again succeeds too (tenant key: any message; user token: its own).
    public func deleteMessage(_ messageID: String, in chatID: String) async throws {
        let output = try await Self.call { try await generated.deleteMessage(path: .init(chatId: chatID, messageId: messageID)) }
        guard case .noContent = output else { throw Self.unexpected(output, "deleteMessage") }
    }

    /// Deletes a chat with its members, messages and receipts (tenant key). The id may be
    /// used again, for an empty chat.
    public func deleteChat(_ chatID: String) async throws {
        let output = try await Self.call { try await generated.deleteChat(path: .init(chatId: chatID)) }
        guard case .noContent = output else { throw Self.unexpected(output, "deleteChat") }
    }
}
