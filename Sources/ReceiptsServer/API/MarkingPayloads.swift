import Hummingbird
import NIOCore
import ReceiptsStore

/// Body of `POST …/read` and `POST …/delivered`: `{"userId"}` alone means everything.
struct MarkRequest: RequestBody {
    let userId: String
    let messageIds: [String]?
    let upTo: String?
    let thread: String?

    enum CodingKeys: String, CodingKey, CaseIterable { case userId, messageIds, upTo, thread }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.userId = try container.decode(String.self, forKey: .userId)
        self.messageIds = try container.decodeUnlessAbsent([String].self, forKey: .messageIds)
        self.upTo = try container.decodeUnlessAbsent(String.self, forKey: .upTo)
        self.thread = try container.decodeUnlessAbsent(String.self, forKey: .thread)
    }

    /// Where a read up to a message, or of all, looks: `"main"` the main timeline, a root's
    /// id its thread, absent the whole chat. With `messageIds` it is 400 (ids name messages
    /// wherever they are).
    func scope() throws -> MarkScope {
        guard let thread = self.thread else { return .wholeChat }
        guard self.messageIds == nil else { throw APIError.invalidRequest("thread goes with upTo or everything, not with messageIds") }
        if thread == "main" { return .mainTimeline }
        return .thread(try Validation.id(thread, field: "thread"))
    }

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

/// `{"marked":…,"unreadCount":…}`: the answer to every read, the most frequent request.
struct MarkReadResponse: JSONResponse {
    let marked: Int
    let unreadCount: Int

    var estimatedJSONBytes: Int { 48 }
}

/// `{"marked":…}`
struct MarkDeliveredResponse: JSONResponse {
    let marked: Int
}

/// `{"unreadCount":…}`
struct UnreadCountResponse: JSONResponse {
    let unreadCount: Int
}
