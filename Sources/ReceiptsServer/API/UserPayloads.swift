import Hummingbird
import NIOCore
import Foundation
import ReceiptsCore
import ReceiptsStore

/// `GET /v1/users/{userId}/unread` answer.
///
/// Written out by hand rather than with `JSONEncoder`: for a user in a thousand chats this is
/// the largest common answer, and the encoder took most of its time (BENCHMARKS.md).
struct UnreadListResponse: ResponseGenerator {
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
    var json: String {
        var json = #"{"total":\#(self.total),"badge":\#(JSONString.quoted(self.badge)),"chats":["#
        json.reserveCapacity(json.utf8.count + self.chats.count * 96)
        for (index, chat) in self.chats.enumerated() {
            if index > 0 { json += "," }
            json += #"{"chatId":"# + JSONString.quoted(chat.chatId)
            json += #","unreadCount":\#(chat.unreadCount),"badge":"# + JSONString.quoted(chat.badge)
            json += #","markedUnread":\#(chat.markedUnread)}"#
        }
        return json + "]}"
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: self.json))
        )
    }
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

struct SettingsResponse: ResponseEncodable {
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

struct TokenResponse: ResponseEncodable {
    let token: String
    let expiresAt: Date
}

/// `POST /admin/v1/tenants` body and answer.
struct CreateTenantRequest: RequestBody {
    let name: String

    enum CodingKeys: String, CodingKey, CaseIterable { case name }
}

struct TenantResponse: ResponseEncodable {
    let id: String
    let name: String
    let apiKey: String
}
