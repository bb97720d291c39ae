import Hummingbird
import NIOCore
import Foundation
import ReceiptsCore
import ReceiptsStore

/// `GET /v1/users/{userId}/unread` answer.
///
/// Written by hand (`JSONResponse`), which also matters for speed: for a user in a thousand
/// chats this is the largest common answer, and `JSONEncoder` took most of its time.
struct UnreadListResponse: JSONResponse {
    struct Chat {
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

    /// `{"total":…,"badge":"…","chats":[{"chatId":"…","unreadCount":…,"badge":"…","markedUnread":…},…]}`
    func write(to json: inout JSONWriter) {
        json.raw(#"{"total":"#)
        json.integer(self.total)
        json.raw(#","badge":"#)
        json.string(self.badge)
        json.raw(#","chats":["#)
        for (index, chat) in self.chats.enumerated() {
            json.raw(index == 0 ? #"{"chatId":"# : #",{"chatId":"#)
            json.string(chat.chatId)
            json.raw(#","unreadCount":"#)
            json.integer(chat.unreadCount)
            json.raw(#","badge":"#)
            json.string(chat.badge)
            json.raw(#","markedUnread":"#)
            json.boolean(chat.markedUnread)
            json.raw("}")
        }
        json.raw("]}")
    }

    var estimatedJSONBytes: Int { 64 + self.chats.count * 96 }
}

/// JSON string literals for hand-written answers.
enum JSONString {
    /// `text` as a JSON string, quotes included.
    static func quoted(_ text: String) -> String {
        // Ids and most texts need no escapes: one scan of their bytes, then one copy.
        if !text.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) {
            return "\"" + text + "\""
        }
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            case "\n": quoted += "\\n"
            case "\r": quoted += "\\r"
            case "\t": quoted += "\\t"
            case _ where scalar.value < 0x20: quoted += String(format: "\\u%04x", scalar.value)
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }
}

/// `PUT /v1/users/{userId}/settings` body and answer.
struct SettingsRequest: RequestBody {
    let readReceipts: Bool

    enum CodingKeys: String, CodingKey, CaseIterable { case readReceipts }
}

/// `{"userId":…,"readReceipts":…}`
struct SettingsResponse: JSONResponse {
    let userId: String
    let readReceipts: Bool

    func write(to json: inout JSONWriter) {
        json.raw(#"{"userId":"#)
        json.string(self.userId)
        json.raw(#","readReceipts":"#)
        json.boolean(self.readReceipts)
        json.raw("}")
    }
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

    func write(to json: inout JSONWriter) {
        json.raw(#"{"token":"#)
        json.string(self.token)
        json.raw(#","expiresAt":"#)
        json.timestamp(self.expiresAt)
        json.raw("}")
    }
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

    func write(to json: inout JSONWriter) {
        json.raw(#"{"id":"#)
        json.string(self.id)
        json.raw(#","name":"#)
        json.string(self.name)
        json.raw(#","apiKey":"#)
        json.string(self.apiKey)
        json.raw("}")
    }
}
