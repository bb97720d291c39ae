import Hummingbird
import NIOCore
import Foundation
import ReceiptsCore
import ReceiptsStore

/// `POST /v1/chats/{chatId}/messages` body.
struct SendMessageRequest: RequestBody {
    let id: String?
    let senderId: String
    let text: String
    let mentions: [String]
    let mentionsAll: Bool
    let threadId: String?

    enum CodingKeys: String, CodingKey, CaseIterable { case id, senderId, text, threadId, mentions, mentionsAll }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.id = try container.decodeUnlessAbsent(String.self, forKey: .id)
        self.senderId = try container.decode(String.self, forKey: .senderId)
        self.text = try container.decode(String.self, forKey: .text)
        self.mentions = try container.decodeUnlessAbsent([String].self, forKey: .mentions) ?? []
        self.mentionsAll = try container.decodeUnlessAbsent(Bool.self, forKey: .mentionsAll) ?? false
        self.threadId = try container.decodeUnlessAbsent(String.self, forKey: .threadId)
    }
}

/// `PATCH /v1/chats/{chatId}/messages/{messageId}` body.
struct EditMessageRequest: RequestBody {
    let text: String

    enum CodingKeys: String, CodingKey, CaseIterable { case text }
}

/// A message as the API shows it, with `receipt` for its sender and, on the single-message
/// endpoint, `recipients`.
struct MessageResponse: Encodable, JSONResponse {
    let id: String
    let chatId: String
    let seq: Int64
    let senderId: String
    let text: String
    let threadId: String?
    let mentions: [String]
    let createdAt: Date
    let editedAt: Date?
    let readBy: UserIdList
    let deliveredTo: UserIdList
    let thread: ThreadSummary?
    let receipt: ReceiptSummary?
    let recipients: [RecipientStatus]?

    /// `message`; for its sender, with the `receipt` under it and, on the single-message
    /// endpoint, its `recipients`.
    init(_ message: MessageRecord, receipt: ReceiptSummary? = nil, recipients: [RecipientStatus]? = nil) {
        self.id = message.id
        self.chatId = message.chatId
        self.seq = message.seq
        self.senderId = message.senderId
        self.text = message.text
        self.threadId = message.threadId
        self.mentions = message.mentions
        self.createdAt = message.createdAt
        self.editedAt = message.editedAt
        self.readBy = message.readBy
        self.deliveredTo = message.deliveredTo
        self.thread = message.thread
        self.receipt = receipt
        self.recipients = recipients
    }

    enum CodingKeys: String, CodingKey {
        case id, chatId, seq, senderId, text, threadId, mentions, createdAt, editedAt, readBy, deliveredTo, thread, receipt, recipients
    }

    /// Every member in the documented order, `receipt` and `recipients` only when present
    /// (a page's messages carry no `recipients`; a message seen by no viewer no `receipt`).
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.id, forKey: .id)
        try container.encode(self.chatId, forKey: .chatId)
        try container.encode(self.seq, forKey: .seq)
        try container.encode(self.senderId, forKey: .senderId)
        try container.encode(self.text, forKey: .text)
        try container.encode(self.threadId, forKey: .threadId)
        try container.encode(self.mentions, forKey: .mentions)
        try container.encode(self.createdAt, forKey: .createdAt)
        try container.encode(self.editedAt, forKey: .editedAt)
        try container.encode(self.readBy, forKey: .readBy)
        try container.encode(self.deliveredTo, forKey: .deliveredTo)
        if let thread = self.thread { try container.encode(thread, forKey: .thread) }
        if let receipt = self.receipt { try container.encode(receipt, forKey: .receipt) }
        if let recipients = self.recipients { try container.encode(recipients, forKey: .recipients) }
    }

    /// About the size of the answer, so that its buffer rarely grows: ids are short.
    var estimatedJSONBytes: Int {
        256 + self.text.utf8.count + (self.mentions.count + self.readBy.count + self.deliveredTo.count) * 24 + (self.recipients?.count ?? 0) * 96
    }
}

extension ThreadSummary: Encodable {
    enum CodingKeys: String, CodingKey { case replies, lastReplyAt }

    /// `{"replies":…,"lastReplyAt":"…"}`
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.replies, forKey: .replies)
        try container.encode(self.lastReplyAt, forKey: .lastReplyAt)
    }
}

/// `GET /v1/chats/{chatId}/messages` answer.
struct MessageListResponse: JSONResponse {
    let messages: [MessageResponse]

    var estimatedJSONBytes: Int { self.messages.reduce(16) { $0 + $1.estimatedJSONBytes } }
}
