import Foundation

/// A chat app's history, made up at random from a seed: chats (some members joining later),
/// messages (replies, mentions) and receipts, each at its own minute. It can be written as
/// an import's NDJSON, or replayed through the API in the order of its times: after either,
/// every answer must be the same (`ImportTests`).
struct ImportScenario {
    struct Chat {
        var id: String
        var kind: String
        /// Members with the minute each joined (0: with the chat).
        var members: [(user: String, joinedAt: Int)]
    }

    struct Message {
        var id: String
        var chat: String
        var sender: String
        var text: String
        var minute: Int
        var thread: String?
        var mentions: [String]
        var readBy: [(user: String, minute: Int)] = []
        var deliveredTo: [(user: String, minute: Int)] = []
    }

    struct Position {
        var chat: String
        var user: String
        var upTo: String
        var minute: Int
        var isRead: Bool
    }

    /// One step of the API replay, at its minute.
    enum Step {
        case join(chat: String, user: String)
        case send(Message)
        case read(chat: String, user: String, message: String)
        case deliver(chat: String, user: String, message: String)
        case position(Position)
    }

    var chats: [Chat] = []
    var messages: [Message] = []
    var positions: [Position] = []

    static let base = Date(timeIntervalSince1970: 1_704_067_200)  // 2024-01-01T00:00:00Z

    static func time(_ minute: Int) -> String {
        ISO8601DateFormatter().string(from: Self.base.addingTimeInterval(Double(minute) * 60))
    }

    /// A history of a few chats with some dozens of messages, its steps each at a minute of
    /// its own (so that the API replay and the import order them alike).
    init(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var minute = 1
        func next() -> Int {
            minute += Int.random(in: 1...3, using: &random)
            return minute
        }
        let users = (1...8).map { "u\($0)" }
        for index in 0..<4 {
            let kind = index == 3 ? "direct" : "group"
            let count = kind == "direct" ? 2 : Int.random(in: 3...6, using: &random)
            let chosen = Array(users.shuffled(using: &random).prefix(count))
            var members: [(String, Int)] = []
            for (position, user) in chosen.enumerated() {
                // In groups, the last member may join later.
                let late = kind == "group" && position == count - 1 && Bool.random(using: &random)
                members.append((user, late ? -1 : 0))
            }
            self.chats.append(Chat(id: "chat\(index)", kind: kind, members: members))
        }
        var sent: [String: [Message]] = [:]
        for number in 0..<60 {
            let chatIndex = Int.random(in: 0..<self.chats.count, using: &random)
            let now = next()
            // A late member joins at some point.
            for (memberIndex, member) in self.chats[chatIndex].members.enumerated() where member.joinedAt == -1 {
                if Int.random(in: 0..<5, using: &random) == 0 { self.chats[chatIndex].members[memberIndex].joinedAt = now }
            }
            let chat = self.chats[chatIndex]
            let present = chat.members.filter { $0.joinedAt >= 0 && $0.joinedAt <= now }.map(\.user)
            let sender = present.randomElement(using: &random)!
            let earlier = sent[chat.id, default: []]
            var thread: String?
            if Int.random(in: 0..<4, using: &random) == 0, let root = earlier.filter({ $0.thread == nil }).randomElement(using: &random) {
                thread = root.id
            }
            var mentions: [String] = []
            if Int.random(in: 0..<4, using: &random) == 0 { mentions = [present.randomElement(using: &random)!, "nobody"] }
            let message = Message(
                id: "m\(number)", chat: chat.id, sender: sender, text: "text \(number)", minute: now, thread: thread, mentions: mentions)
            sent[chat.id, default: []].append(message)
            self.messages.append(message)
        }
        // Receipts: each later than the message, by members who were to receive it.
        for index in self.messages.indices {
            let message = self.messages[index]
            let chat = self.chats.first { $0.id == message.chat }!
            let recipients = chat.members.filter { $0.joinedAt >= 0 && $0.joinedAt <= message.minute && $0.user != message.sender }.map(\.user)
            for user in recipients {
                switch Int.random(in: 0..<4, using: &random) {
                case 0: self.messages[index].readBy.append((user, message.minute + Int.random(in: 1...200, using: &random)))
                case 1: self.messages[index].deliveredTo.append((user, message.minute + Int.random(in: 1...200, using: &random)))
                default: break
                }
            }
        }
        // Positions: a current member up to some message, later than it.
        for _ in 0..<12 {
            let message = self.messages.randomElement(using: &random)!
            let chat = self.chats.first { $0.id == message.chat }!
            let member = chat.members.filter { $0.joinedAt >= 0 }.randomElement(using: &random)!
            // Not before the member joined: through the API, only a member reads.
            let minute = max(message.minute, member.joinedAt) + Int.random(in: 1...300, using: &random)
            self.positions.append(
                Position(chat: chat.id, user: member.user, upTo: message.id, minute: minute, isRead: Bool.random(using: &random)))
        }
        // Members who never joined are left out.
        for index in self.chats.indices { self.chats[index].members.removeAll { $0.joinedAt < 0 } }
    }

    /// The history as an import's body.
    var ndjson: String {
        var lines: [String] = []
        func json(_ object: [String: Any]) -> String {
            String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
        }
        for chat in self.chats {
            let members: [[String: Any]] = chat.members.map { member in
                member.joinedAt == 0 ? ["userId": member.user] : ["userId": member.user, "joinedAt": Self.time(member.joinedAt)]
            }
            lines.append(json(["type": "chat", "id": chat.id, "kind": chat.kind, "members": members, "createdAt": Self.time(0)]))
        }
        for message in self.messages {
            var object: [String: Any] = [
                "type": "message", "id": message.id, "chatId": message.chat, "senderId": message.sender, "text": message.text,
                "createdAt": Self.time(message.minute),
            ]
            if let thread = message.thread { object["threadId"] = thread }
            if !message.mentions.isEmpty { object["mentions"] = message.mentions }
            if !message.readBy.isEmpty { object["readBy"] = message.readBy.map { ["userId": $0.user, "at": Self.time($0.minute)] } }
            if !message.deliveredTo.isEmpty {
                object["deliveredTo"] = message.deliveredTo.map { ["userId": $0.user, "at": Self.time($0.minute)] }
            }
            lines.append(json(object))
        }
        for position in self.positions {
            lines.append(json([
                "type": position.isRead ? "read" : "delivered", "chatId": position.chat, "userId": position.user, "upTo": position.upTo,
                "at": Self.time(position.minute),
            ]))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The same history as API calls, in the order of their minutes (the chats first, with
    /// the members who were there from the start).
    var steps: [Step] {
        var timed: [(minute: Int, order: Int, step: Step)] = []
        for chat in self.chats {
            for member in chat.members where member.joinedAt > 0 {
                timed.append((member.joinedAt, 0, .join(chat: chat.id, user: member.user)))
            }
        }
        for message in self.messages {
            timed.append((message.minute, 1, .send(message)))
            for reader in message.readBy { timed.append((reader.minute, 2, .read(chat: message.chat, user: reader.user, message: message.id))) }
            for receiver in message.deliveredTo {
                timed.append((receiver.minute, 3, .deliver(chat: message.chat, user: receiver.user, message: message.id)))
            }
        }
        for position in self.positions { timed.append((position.minute, 4, .position(position))) }
        return timed.enumerated().sorted { ($0.element.minute, $0.element.order, $0.offset) < ($1.element.minute, $1.element.order, $1.offset) }
            .map(\.element.step)
    }

    var users: [String] { Array(Set(self.chats.flatMap { $0.members.map(\.user) })).sorted() }
}

/// SplitMix64: the same history from the same seed on every machine.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
