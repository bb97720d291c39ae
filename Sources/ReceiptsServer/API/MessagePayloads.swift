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

    enum CodingKeys: String, CodingKey, CaseIterable { case id, senderId, text }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.id = try container.decodeUnlessAbsent(String.self, forKey: .id)
        self.senderId = try container.decode(String.self, forKey: .senderId)
        self.text = try container.decode(String.self, forKey: .text)
    }
}

/// A message as the API shows it, with `receipt` for its sender and, on the single-message
/// endpoint, `recipients`.
struct MessageResponse: Encodable, JSONResponse {
    let id: String
    let chatId: String
    let seq: Int64
    let senderId: String
    let text: String
    let createdAt: Date
    let readBy: UserIds
    let deliveredTo: UserIds
    let receipt: ReceiptSummary?
    let recipients: [RecipientStatus]?

    init(_ message: MessageRecord, receipt: ReceiptSummary? = nil, recipients: [RecipientStatus]? = nil) {
        self.id = message.id
        self.chatId = message.chatId
        self.seq = message.seq
        self.senderId = message.senderId
        self.text = message.text
        self.createdAt = message.createdAt
        self.readBy = .strings(message.receipts.visibleReads.map(\.userId))
        self.deliveredTo = .strings(message.receipts.deliveredTo)
        self.receipt = receipt
        self.recipients = recipients
    }

    /// A message of a page, its lists written straight from what the database sent.
    init(_ message: ListedMessage, receipt: ReceiptSummary?) {
        self.id = message.id
        self.chatId = message.chatId
        self.seq = message.seq
        self.senderId = message.senderId
        self.text = message.text
        self.createdAt = message.createdAt
        self.readBy = .stored(message.readBy)
        self.deliveredTo = .stored(message.deliveredTo)
        self.receipt = receipt
        self.recipients = nil
    }

    /// The users of `readBy` or `deliveredTo`: `String`s, or the ids of a page as the
    /// database sent them.
    enum UserIds: Encodable {
        case strings([String])
        case stored(UserIdList)

        var count: Int {
            switch self {
            case .strings(let ids): ids.count
            case .stored(let ids): ids.count
            }
        }

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .strings(let ids): try ids.encode(to: encoder)
            case .stored(let ids): try ids.strings.encode(to: encoder)
            }
        }
    }
}

extension MessageResponse {
    /// Written by hand for the member order (`JSONResponse`) and for speed: with
    /// `JSONEncoder`, encoding took 6 % of a send's time in the service and most of the time
    /// of a page of a large group's messages, with their `readBy`, `deliveredTo` and
    /// `recipients`.
    ///
    /// `{"id":…,"chatId":…,"seq":…,"senderId":…,"text":…,"createdAt":…,"readBy":[…],"deliveredTo":[…]}`,
    /// with `"receipt":{…}` and `"recipients":[…]` after them when present.
    func write(to json: inout JSONWriter) {
        json.raw(#"{"id":"#)
        json.string(self.id)
        json.raw(#","chatId":"#)
        json.string(self.chatId)
        json.raw(#","seq":"#)
        json.integer(self.seq)
        json.raw(#","senderId":"#)
        json.string(self.senderId)
        json.raw(#","text":"#)
        json.string(self.text)
        json.raw(#","createdAt":"#)
        json.timestamp(self.createdAt)
        json.raw(#","readBy":"#)
        json.strings(self.readBy)
        json.raw(#","deliveredTo":"#)
        json.strings(self.deliveredTo)
        if let receipt = self.receipt {
            json.raw(#","receipt":{"state":"#)
            json.string(receipt.state.rawValue)
            json.raw(#","recipients":"#)
            json.integer(receipt.recipients)
            json.raw(#","delivered":"#)
            json.integer(receipt.delivered)
            json.raw(#","read":"#)
            json.integer(receipt.read)
            json.raw(#","readAt":"#)
            json.timestamp(receipt.readAt)
            json.raw(#","label":"#)
            json.string(receipt.label)
            json.raw("}")
        }
        if let recipients = self.recipients {
            json.raw(#","recipients":["#)
            for (index, recipient) in recipients.enumerated() {
                json.raw(index == 0 ? #"{"userId":"# : #",{"userId":"#)
                json.string(recipient.userId)
                json.raw(#","deliveredAt":"#)
                json.timestamp(recipient.deliveredAt)
                json.raw(#","readAt":"#)
                json.timestamp(recipient.readAt)
                json.raw("}")
            }
            json.raw("]")
        }
        json.raw("}")
    }

    /// About the size of the answer, so that its buffer rarely grows: ids are short.
    var estimatedJSONBytes: Int {
        256 + self.text.utf8.count + (self.readBy.count + self.deliveredTo.count) * 24 + (self.recipients?.count ?? 0) * 96
    }
}

/// `GET /v1/chats/{chatId}/messages` answer.
struct MessageListResponse: Encodable, JSONResponse {
    let messages: [MessageResponse]
}

extension MessageListResponse {
    /// `{"messages":[…]}`, each message as `MessageResponse.write(to:)` writes it.
    func write(to json: inout JSONWriter) {
        json.raw(#"{"messages":["#)
        for (index, message) in self.messages.enumerated() {
            if index > 0 { json.raw(",") }
            message.write(to: &json)
        }
        json.raw("]}")
    }

    var estimatedJSONBytes: Int { self.messages.reduce(16) { $0 + $1.estimatedJSONBytes } }
}

extension JSONWriter {
    /// `[…]` of the users of `readBy` or `deliveredTo`.
    fileprivate mutating func strings(_ ids: MessageResponse.UserIds) {
        switch ids {
        case .strings(let ids): self.strings(ids)
        case .stored(let ids): self.strings(ids)
        }
    }
}
