import Hummingbird
import NIOCore
import Foundation
import ReceiptsCore
import ReceiptsStore

/// `POST /v1/chats/{chatId}/messages` body.
struct SendMessageRequest: Decodable {
    let id: String?
    let senderId: String
    let text: String
}

/// A message as the API shows it, with `receipt` for its sender and, on the single-message
/// endpoint, `recipients`.
struct MessageResponse: ResponseEncodable {
    let id: String
    let chatId: String
    let seq: Int64
    let senderId: String
    let text: String
    let createdAt: Date
    let readBy: [String]
    let deliveredTo: [String]
    let receipt: ReceiptSummary?
    let recipients: [RecipientStatus]?

    init(_ message: MessageRecord, receipt: ReceiptSummary? = nil, recipients: [RecipientStatus]? = nil) {
        self.id = message.id
        self.chatId = message.chatId
        self.seq = message.seq
        self.senderId = message.senderId
        self.text = message.text
        self.createdAt = message.createdAt
        self.readBy = message.receipts.visibleReads.map(\.userId)
        self.deliveredTo = message.receipts.deliveredTo
        self.receipt = receipt
        self.recipients = recipients
    }
}

extension MessageResponse {
    /// Written out by hand (`JSONWriter`), as `JSONEncoder` would write it: `JSONEncoder` was
    /// 6 % of a send's time in the service, and most of the time of a large group's messages
    /// with their `readBy`, `deliveredTo` and `recipients` (BENCHMARKS.md).
    func response(from request: Request, context: some RequestContext) throws -> Response {
        var json = JSONWriter(capacity: self.estimatedJSONBytes)
        self.write(to: &json)
        return json.response
    }

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

    /// The answer as text (tests compare it with `JSONEncoder`'s).
    var json: String {
        var json = JSONWriter(capacity: self.estimatedJSONBytes)
        self.write(to: &json)
        return json.text
    }
}

/// `GET /v1/chats/{chatId}/messages` answer.
struct MessageListResponse: ResponseEncodable {
    let messages: [MessageResponse]
}

extension MessageListResponse {
    /// `{"messages":[…]}`, written out by hand as each message is (`MessageResponse.write(to:)`).
    func response(from request: Request, context: some RequestContext) throws -> Response {
        var json = JSONWriter(capacity: self.messages.reduce(16) { $0 + $1.estimatedJSONBytes })
        self.write(to: &json)
        return json.response
    }

    func write(to json: inout JSONWriter) {
        json.raw(#"{"messages":["#)
        for (index, message) in self.messages.enumerated() {
            if index > 0 { json.raw(",") }
            message.write(to: &json)
        }
        json.raw("]}")
    }

    /// The answer as text (tests compare it with `JSONEncoder`'s).
    var json: String {
        var json = JSONWriter(capacity: 1024)
        self.write(to: &json)
        return json.text
    }
}
