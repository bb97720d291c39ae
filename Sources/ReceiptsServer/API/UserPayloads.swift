import Hummingbird
import Foundation
import ReceiptsCore
import ReceiptsStore

/// `GET /v1/users/{userId}/unread` answer.
struct UnreadListResponse: ResponseEncodable {
    struct Chat: Encodable {
        let chatId: String
        let unreadCount: Int
        let badge: String
        let markedUnread: Bool
    }

    let total: Int
    let badge: String
    let chats: [Chat]

    init(_ chats: [UnreadChat]) {
        self.chats = chats.map {
            Chat(chatId: $0.chatId, unreadCount: $0.unreadCount, badge: UnreadBadge.text(for: $0.unreadCount), markedUnread: $0.markedUnread)
        }
        self.total = chats.reduce(0) { $0 + $1.unreadCount }
        self.badge = UnreadBadge.text(for: self.total)
    }
}

/// `PUT /v1/users/{userId}/settings` body and answer.
struct SettingsRequest: Decodable {
    let readReceipts: Bool
}

struct SettingsResponse: ResponseEncodable {
    let userId: String
    let readReceipts: Bool
}

/// `POST /v1/tokens` body and answer.
struct TokenRequest: Decodable {
    let userId: String
    let ttlSeconds: Int?
}

struct TokenResponse: ResponseEncodable {
    let token: String
    let expiresAt: Date
}

/// `POST /admin/v1/tenants` body and answer.
struct CreateTenantRequest: Decodable {
    let name: String
}

struct TenantResponse: ResponseEncodable {
    let id: String
    let name: String
    let apiKey: String
}
