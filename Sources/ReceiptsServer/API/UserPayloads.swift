import Hummingbird
import NIOCore
import Foundation
import ReceiptsCore
import ReceiptsStore

/// `GET /v1/users/{userId}/unread` answer.
///
/// `{"total":…,"badge":"…","chats":[{"chatId":"…","unreadCount":…,"badge":"…","markedUnread":…},…]}`:
/// for a user in a thousand chats the largest common answer.
struct UnreadListResponse: JSONResponse {
    struct Chat: Encodable {
        let chatId: String
        let unreadCount: Int
        let badge: String
        let markedUnread: Bool
        let mentions: Int
        let muted: Bool
        let threads: [Thread]
    }

    struct Thread: Encodable {
        let threadId: String
        let unreadCount: Int
        let mentions: Int
    }

    let total: Int
    let badge: String
    /// Unread mentions in every chat, muted ones included: a mention breaks through a mute.
    let mentions: Int
    let mentionsBadge: String
    let chats: [Chat]

    init(_ chats: [UnreadChat]) {
        self.chats = chats.map {
            Chat(
                chatId: $0.chatId, unreadCount: $0.unreadCount, badge: UnreadBadge.text(for: $0.unreadCount),
                markedUnread: $0.markedUnread, mentions: $0.mentions, muted: $0.muted,
                threads: $0.threads.map { Thread(threadId: $0.threadId, unreadCount: $0.unreadCount, mentions: $0.mentions) })
        }
        // The app icon's count: muted chats stay out of it.
        self.total = chats.reduce(0) { $0 + ($1.muted ? 0 : $1.unreadCount) }
        self.badge = UnreadBadge.text(for: self.total)
        self.mentions = chats.reduce(0) { $0 + $1.mentions }
        self.mentionsBadge = UnreadBadge.text(for: self.mentions)
    }

    /// `{"total":…,"badge":"…","mentions":…,"mentionsBadge":"…","chats":[{"chatId":"…","unreadCount":…,"badge":"…",`
    /// `"markedUnread":…,"mentions":…,"muted":…,"threads":[{"threadId":"…","unreadCount":…,"mentions":…},…]},…]}`

    var estimatedJSONBytes: Int { 64 + self.chats.reduce(0) { $0 + 128 + $1.threads.count * 64 } }
}

/// `PUT /v1/users/{userId}/settings` body and answer.
struct SettingsRequest: RequestBody {
    let readReceipts: Bool

    enum CodingKeys: String, CodingKey, CaseIterable { case readReceipts }
}

/// `PUT /v1/chats/{chatId}/members/{userId}/settings` body.
struct MemberSettingsRequest: RequestBody {
    let muted: Bool

    enum CodingKeys: String, CodingKey, CaseIterable { case muted }
}

/// `{"chatId":…,"userId":…,"muted":…}`
struct MemberSettingsResponse: JSONResponse {
    let chatId: String
    let userId: String
    let muted: Bool
}

/// `{"userId":…,"readReceipts":…}`
struct SettingsResponse: JSONResponse {
    let userId: String
    let readReceipts: Bool
}

/// `POST /v1/tokens` body and answer.
struct TokenRequest: RequestBody {
    let userId: String
    let ttlSeconds: Int?

    enum CodingKeys: String, CodingKey, CaseIterable { case userId, ttlSeconds }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.userId = try container.decode(String.self, forKey: .userId)
        self.ttlSeconds = try container.decodeUnlessAbsent(Int.self, forKey: .ttlSeconds)
    }
}

/// `{"token":…,"expiresAt":…}`
struct TokenResponse: JSONResponse {
    let token: String
    let expiresAt: Date
}

/// `POST /admin/v1/tenants` body and answer.
struct CreateTenantRequest: RequestBody {
    let name: String

    enum CodingKeys: String, CodingKey, CaseIterable { case name }
}

/// `{"id":…,"name":…,"apiKey":…}`
struct TenantResponse: JSONResponse {
    let id: String
    let name: String
    let apiKey: String
}
