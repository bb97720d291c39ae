import Foundation

/// What creating or confirming a chat did.
public enum PutChatOutcome: String, Sendable {
    case created
    /// Same kind and the same current members: nothing changed.
    case unchanged
    /// The chat exists with another kind or other members.
    case conflict
}

/// What a join did.
public enum JoinOutcome: String, Sendable {
    case joined
    case alreadyMember = "already_member"
    case directChat = "direct_chat"
    case chatNotFound = "chat_not_found"
}

/// What a leave did.
public enum LeaveOutcome: String, Sendable {
    case left
    case notMember = "not_member"
    case chatNotFound = "chat_not_found"
}

/// What sending a message did.
public enum SendOutcome: Sendable {
    case created(MessageRecord)
    /// The same id was sent before with the same content: sender, text, thread and mentions.
    case existing(MessageRecord)
    /// The id was used before for another message.
    case conflict
    case senderNotMember
    case chatNotFound
    /// The thread named is no message of the chat.
    case threadNotFound
    /// The thread named is itself a reply: threads do not nest.
    case threadIsReply
}

/// Which messages a marking request is about.
public enum MarkTarget: Sendable {
    case messages([String])
    case upTo(String)
    case all
}

/// Where a marking up to a message, or of all, looks (threads): the whole chat, the main
/// timeline, or one thread's replies.
public enum MarkScope: Sendable, Hashable {
    case wholeChat
    case mainTimeline
    /// The replies of the root with this id.
    case thread(String)

    /// The scope as the marking functions take it: null, '' or the root's id.
    var sqlValue: String? {
        switch self {
        case .wholeChat: nil
        case .mainTimeline: ""
        case .thread(let root): root
        }
    }
}

/// A SQL function answered an outcome the store does not know: a bug (a typo in SQL, or SQL
/// and Swift out of step). The service answers 500 and logs it, never a guess at a 4xx.
public struct UnexpectedOutcome: Error, CustomStringConvertible {
    public let function: String
    public let outcome: String
    public var description: String { "\(self.function) answered the unknown outcome \(self.outcome)" }
}

/// Why a marking request changed nothing.
public enum MarkFailure: String, Error, Sendable {
    case chatNotFound = "chat_not_found"
    case notMember = "not_member"
    case messageNotFound = "message_not_found"
    /// The scope names no root of the chat (no message, or a reply).
    case threadNotFound = "thread_not_found"
}

/// The unread state of one of a user's chats.
public struct UnreadChat: Sendable, Hashable {
    public let chatId: String
    public let unreadCount: Int
    public let markedUnread: Bool
    /// The user muted the chat: its count stays out of their total and badge.
    public let muted: Bool
    /// Unread messages that mention the user.
    public let mentions: Int
    /// Its threads with unread replies, newest first (at most 100).
    public let threads: [UnreadThread]

    public init(
        chatId: String, unreadCount: Int, markedUnread: Bool, muted: Bool = false, mentions: Int = 0, threads: [UnreadThread] = []
    ) {
        self.chatId = chatId
        self.unreadCount = unreadCount
        self.markedUnread = markedUnread
        self.muted = muted
        self.mentions = mentions
        self.threads = threads
    }
}

/// A thread with unread replies: its root, how many, and how many mention the user.
public struct UnreadThread: Sendable, Hashable {
    public let threadId: String
    public let unreadCount: Int
    public let mentions: Int

    public init(threadId: String, unreadCount: Int, mentions: Int) {
        self.threadId = threadId
        self.unreadCount = unreadCount
        self.mentions = mentions
    }

    /// The threads of `receipts.unread_counts`' JSON: `[[thread id, unread, mentions], …]`.
    static func list(json: String) throws -> [UnreadThread] {
        let triples = try JSONDecoder().decode([Triple].self, from: Data(json.utf8))
        return triples.map { UnreadThread(threadId: $0.threadId, unreadCount: $0.unreadCount, mentions: $0.mentions) }
    }

    /// One `[thread id, unread, mentions]`.
    private struct Triple: Decodable {
        let threadId: String
        let unreadCount: Int
        let mentions: Int

        init(from decoder: any Decoder) throws {
            var array = try decoder.unkeyedContainer()
            self.threadId = try array.decode(String.self)
            self.unreadCount = try array.decode(Int.self)
            self.mentions = try array.decode(Int.self)
        }
    }
}

/// What muting or unmuting a chat for a member did (`ReceiptsStore.setChatMuted`).
public enum SetMutedOutcome: String, Sendable {
    case set
    /// The user is not (or no longer) a member of the chat.
    case notMember = "not_member"
    case chatNotFound = "chat_not_found"
}
