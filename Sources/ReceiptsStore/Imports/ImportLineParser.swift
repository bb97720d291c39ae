import Foundation
import ReceiptsCore

/// Why a line of an import was rejected: its number (1-based, empty lines counted), a code
/// (`invalid_json`, `invalid_line`, or a rule's code from loading: api.md lists them) and why.
public struct ImportLineError: Error, Sendable, Equatable {
    public var line: Int64
    public var code: String
    public var message: String

    public init(line: Int64, code: String, message: String) {
        self.line = line
        self.code = code
        self.message = message
    }
}

/// Reads one line of an import: a JSON object whose `type` says its kind, checked against the
/// API's rules for requests of that kind (ids, kinds, member counts, text, times).
///
/// Fields it does not know are ignored (an export may carry more than the import takes); a
/// field of the wrong JSON type, or one missing, is `invalid_line`; a line that is no JSON
/// object is `invalid_json`.
public struct ImportLineParser {
    /// Most readers or deliverers one message line may list (a chat's most members).
    public static let maximumReceiptsPerMessage = RequestLimits.maximumMembers

    private let decoder = JSONDecoder()

    public init() {}

    /// The line's `ImportLine`, or why it is rejected (`line` is its number).
    public func parse(_ bytes: some Collection<UInt8>, line: Int64) -> Result<ImportLine, ImportLineError> {
        let wire: WireLine
        do {
            wire = try self.decoder.decode(WireLine.self, from: Data(bytes))
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            return .failure(ImportLineError(line: line, code: "invalid_json", message: "not a JSON object"))
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            return .failure(ImportLineError(line: line, code: "invalid_json", message: "not a JSON object"))
        } catch let error as DecodingError {
            return .failure(ImportLineError(line: line, code: "invalid_line", message: Self.describe(error)))
        } catch {
            return .failure(ImportLineError(line: line, code: "invalid_json", message: "not a JSON object"))
        }
        do {
            return .success(try Self.check(wire))
        } catch let problem as Problem {
            return .failure(ImportLineError(line: line, code: "invalid_line", message: problem.message))
        } catch {
            return .failure(ImportLineError(line: line, code: "invalid_line", message: "\(error)"))
        }
    }

    // MARK: - The rules of each kind

    private struct Problem: Error {
        let message: String
    }

    private static func check(_ wire: WireLine) throws -> ImportLine {
        switch wire.type {
        case "chat": return .chat(try self.chat(wire))
        case "message": return .message(try self.message(wire))
        case "read", "delivered": return .position(try self.position(wire, isRead: wire.type == "read"))
        case nil: throw Problem(message: "type is missing")
        case let other?: throw Problem(message: "type must be chat, message, read or delivered, not \"\(other)\"")
        }
    }

    private static func chat(_ wire: WireLine) throws -> ImportLine.Chat {
        let id = try self.id(wire.id, "id")
        guard let kind = wire.kind.flatMap(ChatKind.init(rawValue:)) else {
            throw Problem(message: "kind must be \"direct\" or \"group\"")
        }
        guard let wireMembers = wire.members else { throw Problem(message: "members is missing") }
        let members = try wireMembers.map { member in
            ImportLine.Member(userId: try self.id(member.userId, "members[].userId"), joinedAt: try self.time(member.joinedAt, "members[].joinedAt"))
        }
        guard Set(members.map(\.userId)).count == members.count else { throw Problem(message: "members must not repeat a user") }
        switch kind {
        case .direct where members.count != 2:
            throw Problem(message: "a direct chat has exactly 2 members")
        case .group where members.isEmpty || members.count > RequestLimits.maximumMembers:
            throw Problem(message: "a group has 1-\(RequestLimits.maximumMembers) members")
        default:
            break
        }
        return ImportLine.Chat(id: id, kind: kind, members: members, createdAt: try self.time(wire.createdAt, "createdAt"))
    }

    private static func message(_ wire: WireLine) throws -> ImportLine.Message {
        let id = try self.id(wire.id, "id")
        let chatId = try self.id(wire.chatId, "chatId")
        let senderId = try self.id(wire.senderId, "senderId")
        guard let text = wire.text else { throw Problem(message: "text is missing") }
        guard text.utf8.count <= RequestLimits.maximumTextBytes else { throw Problem(message: "text is longer than 64 KiB") }
        guard !text.utf8.contains(0) else { throw Problem(message: "text must not contain NUL characters") }
        guard let createdAt = try self.time(wire.createdAt, "createdAt") else { throw Problem(message: "createdAt is missing") }
        let mentions = try (wire.mentions ?? []).map { try self.id($0, "mentions[]") }
        guard mentions.count <= RequestLimits.maximumMentions else {
            throw Problem(message: "mentions may name at most \(RequestLimits.maximumMentions) users")
        }
        return ImportLine.Message(
            id: id, chatId: chatId, senderId: senderId, text: text, createdAt: createdAt,
            threadId: try wire.threadId.map { try self.id($0, "threadId") }, mentions: mentions,
            mentionsAll: wire.mentionsAll ?? false,
            readBy: try self.receipts(wire.readBy, "readBy"), deliveredTo: try self.receipts(wire.deliveredTo, "deliveredTo"))
    }

    private static func receipts(_ wire: [WireReceipt]?, _ field: String) throws -> [ImportLine.Receipt] {
        guard let wire else { return [] }
        guard wire.count <= Self.maximumReceiptsPerMessage else {
            throw Problem(message: "\(field) may list at most \(Self.maximumReceiptsPerMessage) users")
        }
        return try wire.map { ImportLine.Receipt(userId: try self.id($0.userId, "\(field)[].userId"), at: try self.time($0.at, "\(field)[].at")) }
    }

    private static func position(_ wire: WireLine, isRead: Bool) throws -> ImportLine.Position {
        ImportLine.Position(
            chatId: try self.id(wire.chatId, "chatId"), userId: try self.id(wire.userId, "userId"),
            upTo: try self.id(wire.upTo, "upTo"), at: try self.time(wire.at, "at"), isRead: isRead)
    }

    private static func id(_ value: String?, _ field: String) throws -> String {
        guard let value else { throw Problem(message: "\(field) is missing") }
        guard Identifier.isValid(value) else { throw Problem(message: "\(field) must be 1-128 characters of A-Z a-z 0-9 . _ : @ -") }
        return value
    }

    private static func time(_ value: String?, _ field: String) throws -> ImportTime? {
        guard let value else { return nil }
        guard let time = ImportTime(value) else {
            throw Problem(message: "\(field) must be an RFC 3339 time with a zone, such as 2024-05-01T09:30:00Z")
        }
        return time
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
                .replacingOccurrences(of: ".[", with: "[")
        }
        switch error {
        case .typeMismatch(_, let context): return "\(path(context)) has the wrong JSON type"
        case .valueNotFound(_, let context): return "\(path(context)) must not be null"
        case .keyNotFound(let key, let context):
            let parent = path(context)
            return parent.isEmpty ? "\(key.stringValue) is missing" : "\(parent).\(key.stringValue) is missing"
        case .dataCorrupted(let context): return "\(path(context)) is not valid"
        @unknown default: return "the line does not fit its type"
        }
    }

    // MARK: - The wire form: every field of every kind, each optional

    private struct WireLine: Decodable {
        var type: String?
        var id: String?
        var kind: String?
        var members: [WireMember]?
        var createdAt: String?
        var chatId: String?
        var senderId: String?
        var text: String?
        var threadId: String?
        var mentions: [String]?
        var mentionsAll: Bool?
        var readBy: [WireReceipt]?
        var deliveredTo: [WireReceipt]?
        var userId: String?
        var upTo: String?
        var at: String?
    }

    private struct WireMember: Decodable {
        var userId: String?
        var joinedAt: String?
    }

    private struct WireReceipt: Decodable {
        var userId: String?
        var at: String?
    }
}
