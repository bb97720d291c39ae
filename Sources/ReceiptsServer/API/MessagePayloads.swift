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
        self.deliveredTo = message.receipts.deliveries.map(\.userId)
        self.receipt = receipt
        self.recipients = recipients
    }
}

extension MessageResponse {
    /// Written out by hand when there is neither `receipt` nor `recipients` (the answer to
    /// every send): `JSONEncoder` was 6 % of a send's time in the service (BENCHMARKS.md).
    func response(from request: Request, context: some RequestContext) throws -> Response {
        guard self.receipt == nil, self.recipients == nil else {
            return try context.responseEncoder.encode(self, from: request, context: context)
        }
        return Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: self.plainJSON))
        )
    }

    /// `{"id":…,"chatId":…,"seq":…,"senderId":…,"text":…,"createdAt":…,"readBy":[…],"deliveredTo":[…]}`
    var plainJSON: String {
        var json = #"{"id":"# + JSONString.quoted(self.id)
        json.reserveCapacity(self.text.utf8.count + 256)
        json += #","chatId":"# + JSONString.quoted(self.chatId)
        json += #","seq":\#(self.seq),"senderId":"# + JSONString.quoted(self.senderId)
        json += #","text":"# + JSONString.quoted(self.text)
        json += #","createdAt":"# + JSONString.quoted(JSONCoding.timestamp(self.createdAt))
        json += #","readBy":["# + self.readBy.map(JSONString.quoted).joined(separator: ",")
        json += #"],"deliveredTo":["# + self.deliveredTo.map(JSONString.quoted).joined(separator: ",")
        return json + "]}"
    }
}

/// `GET /v1/chats/{chatId}/messages` answer.
struct MessageListResponse: ResponseEncodable {
    let messages: [MessageResponse]
}
