import Hummingbird
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
        self.deliveredTo = message.receipts.deliveries.map(\.userId)
        self.receipt = receipt
        self.recipients = recipients
    }
}

/// `GET /v1/chats/{chatId}/messages` answer.
struct MessageListResponse: ResponseEncodable {
    let messages: [MessageResponse]
}
