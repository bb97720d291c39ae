import Foundation

/// One event of the stream: something changed in a chat the credential sees.
///
/// `id` is opaque: `ReceiptsClient.events(resumingAfter:)` keeps the last one and resumes
/// after it by itself; store it too if the consumer must resume after a restart of its own.
public struct ReceiptsEvent: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// A message was recorded (`userID` sent it); `mentions` and `mentionsAll` say whom
        /// it mentions, `threadID` which thread it replies in (nil: the main timeline).
        case messageCreated
        /// A marking request delivered `messageIDs` to `userID`.
        case receiptDelivered
        /// A marking request read `messageIDs` by `userID` (never for hidden reads).
        case receiptRead
        /// `userID`'s unread count of the chat, or their total, changed by their own action
        /// (`unreadMentions`: how many of their unread messages there mention them;
        /// `threadID` and `threadCounts` after a read in one thread; `totals`: their badges).
        case unreadChanged(unreadCount: Int, markedUnread: Bool)
        /// `messageIDs` were deleted from the chat; `userID` had sent them: the one deleted,
        /// or a thread's root followed by its replies, which go with it.
        case messageDeleted
        /// The text of `messageIDs` (one) was edited; `userID` had sent it. The event
        /// carries no text: fetch the message (`ReceiptsClient.receipt(of:in:viewer:)`, or
        /// a page of `messages(in:)`). Its receipts and unread counts are as they were.
        case messageEdited
        /// The chat was deleted with everything in it.
        case chatDeleted
        /// An import loaded history into the chat: reload what you show of it.
        case chatImported
        /// `userID` was erased (tenant key only), once the erasure is done.
        case userErased
        /// The position to resume from was unknown or expired: events were missed. Reload
        /// what you show; the sequence carries on from this event's id.
        case resyncRequired
        /// A type this client does not know (a newer service); the contract says to
        /// ignore it.
        case other(String)
    }

    public var id: String
    public var kind: Kind
    public var chatID: String?
    public var userID: String?
    public var messageIDs: [String]
    public var at: Date?
    /// `messageCreated`: the members the message named (`[]` for none, and for other kinds).
    /// When it mentioned everyone (`mentionsAll`) these are still only the named ones
    /// (usually none): the event does not list every member, so that it does not grow with
    /// the group; fetch the message for its full `mentions`.
    public var mentions: [String]
    /// `messageCreated`: the message mentioned every member but its sender.
    public var mentionsAll: Bool
    /// `messageCreated`: the root of the thread the message replies in; nil for a message
    /// of the main timeline. `unreadChanged`: the thread the read was in, when its replies
    /// were all of one (then `threadCounts` are that thread's). Nil for other kinds.
    public var threadID: String?
    /// `unreadChanged`: how many of the user's unread messages in the chat mention them
    /// (0 for other kinds).
    public var unreadMentions: Int
    /// `unreadChanged` with a `threadID`: the user's unread replies left in that thread.
    public var threadCounts: Counts?
    /// `unreadChanged`: the user's totals over every chat, as the service delivered the
    /// event (so the current ones, also on a replay): what an app icon shows.
    public var totals: Totals?

    /// Unread messages, and how many of them mention the user.
    public struct Counts: Sendable, Hashable {
        public var unread: Int
        public var mentions: Int

        public init(unread: Int, mentions: Int) {
            self.unread = unread
            self.mentions = mentions
        }
    }

    /// The top of `ReceiptsClient.unread(for:)`: `total` and `badge` leave muted chats out;
    /// `mentions` and `mentionsBadge` count every chat.
    public struct Totals: Sendable, Hashable {
        public var total: Int
        public var badge: String
        public var mentions: Int
        public var mentionsBadge: String

        public init(total: Int, badge: String, mentions: Int, mentionsBadge: String) {
            self.total = total
            self.badge = badge
            self.mentions = mentions
            self.mentionsBadge = mentionsBadge
        }
    }

    public init(
        id: String, kind: Kind, chatID: String? = nil, userID: String? = nil, messageIDs: [String] = [], at: Date? = nil,
        mentions: [String] = [], mentionsAll: Bool = false, threadID: String? = nil, unreadMentions: Int = 0,
        threadCounts: Counts? = nil, totals: Totals? = nil
    ) {
        self.id = id
        self.kind = kind
        self.chatID = chatID
        self.userID = userID
        self.messageIDs = messageIDs
        self.at = at
        self.mentions = mentions
        self.mentionsAll = mentionsAll
        self.threadID = threadID
        self.unreadMentions = unreadMentions
        self.threadCounts = threadCounts
        self.totals = totals
    }

    /// The `Event` JSON of the contract. Decoded leniently by type name rather than with
    /// the generated `Components.Schemas.Event`, whose closed `type` enum would fail on an
    /// event type a newer service adds.
    private struct Wire: Decodable {
        var id: String
        var type: String
        var chatId: String?
        var userId: String?
        var messageIds: [String]?
        var at: String?
        var unreadCount: Int?
        var markedUnread: Bool?
        /// `message.created`: the members named; `unread.changed`: a count.
        var mentions: Mentions?
        var mentionsAll: Bool?
        var threadId: String?
        var threadUnreadCount: Int?
        var threadMentions: Int?
        var total: Int?
        var badge: String?
        var totalMentions: Int?
        var mentionsBadge: String?
    }

    /// `mentions` is a list of ids on `message.created` and a number on `unread.changed`.
    private enum Mentions: Decodable {
        case named([String])
        case unread(Int)

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let count = try? container.decode(Int.self) {
                self = .unread(count)
            } else {
                self = .named(try container.decode([String].self))
            }
        }

        var named: [String] { if case .named(let ids) = self { ids } else { [] } }
        var unread: Int { if case .unread(let count) = self { count } else { 0 } }
    }

    init(json: Data) throws {
        let wire = try JSONDecoder().decode(Wire.self, from: json)
        let kind: Kind =
            switch wire.type {
            case "message.created": .messageCreated
            case "receipt.delivered": .receiptDelivered
            case "receipt.read": .receiptRead
            case "unread.changed": .unreadChanged(unreadCount: wire.unreadCount ?? 0, markedUnread: wire.markedUnread ?? false)
            case "message.deleted": .messageDeleted
            case "message.edited": .messageEdited
            case "chat.deleted": .chatDeleted
            case "chat.imported": .chatImported
            case "user.erased": .userErased
            case "resync.required": .resyncRequired
            default: .other(wire.type)
            }
        self.init(
            id: wire.id, kind: kind, chatID: wire.chatId, userID: wire.userId, messageIDs: wire.messageIds ?? [],
            at: wire.at.flatMap { try? Date($0, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)) },
            mentions: wire.mentions?.named ?? [], mentionsAll: wire.mentionsAll ?? false, threadID: wire.threadId,
            unreadMentions: wire.mentions?.unread ?? 0,
            threadCounts: wire.threadUnreadCount.map { Counts(unread: $0, mentions: wire.threadMentions ?? 0) },
            totals: wire.total.map {
                Totals(total: $0, badge: wire.badge ?? "", mentions: wire.totalMentions ?? 0, mentionsBadge: wire.mentionsBadge ?? "")
            })
    }
}
