import Hummingbird
import ReceiptsStore

/// Body of `POST …/read` and `POST …/delivered`: `{"userId"}` alone means everything.
struct MarkRequest: Decodable {
    let userId: String
    let messageIds: [String]?
    let upTo: String?

    /// Which messages the request is about, validated.
    func target() throws -> MarkTarget {
        switch (self.messageIds, self.upTo) {
        case (.some, .some):
            throw APIError.invalidRequest("give either messageIds or upTo, not both")
        case (.some(let ids), nil):
            return .messages(try Validation.messageIds(ids))
        case (nil, .some(let upTo)):
            return .upTo(try Validation.id(upTo, field: "upTo"))
        case (nil, nil):
            return .all
        }
    }
}

struct MarkReadResponse: ResponseEncodable {
    let marked: Int
    let unreadCount: Int
}

struct MarkDeliveredResponse: ResponseEncodable {
    let marked: Int
}

struct UnreadCountResponse: ResponseEncodable {
    let unreadCount: Int
}
