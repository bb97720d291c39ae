import Hummingbird
import Foundation
import ReceiptsCore
import ReceiptsStore

/// `PUT /v1/chats/{chatId}` body.
struct PutChatRequest: RequestBody {
    let kind: String
    let members: [String]

    enum CodingKeys: String, CodingKey, CaseIterable { case kind, members }
}

/// `POST /v1/chats/{chatId}/members` and `POST …/unread` bodies.
struct UserRequest: RequestBody {
    let userId: String

    enum CodingKeys: String, CodingKey, CaseIterable { case userId }
}

/// A chat as the API shows it: `{"id","kind","members":[{"userId","joinedAt"}],"createdAt"}`.
struct ChatResponse: JSONResponse {
    struct Member: Encodable {
        let userId: String
        let joinedAt: Date
    }

    let id: String
    let kind: String
    let members: [Member]
    let createdAt: Date

    init(_ chat: ChatRecord) {
        self.id = chat.id
        self.kind = chat.kind.rawValue
        self.members = chat.members.map { Member(userId: $0.userId, joinedAt: $0.joinedAt) }
        self.createdAt = chat.createdAt
    }

    var estimatedJSONBytes: Int { 128 + self.members.count * 64 }
}
