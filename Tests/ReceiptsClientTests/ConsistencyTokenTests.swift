import Foundation
import HTTPTypes
import OpenAPIRuntime
import ReceiptsClient
import Synchronization
import Testing

/// Read-your-writes (docs/api.md, "Read-your-writes: the consistency token"): the client keeps
/// the token of each 2xx answer to a write and sends it with the four reads a standby may
/// serve. What the client does with the header needs no database, so most of it is checked
/// with a transport that answers as the service does, a token on every write; the last test
/// runs against the real service.
@Suite("ReceiptsClient consistency tokens")
struct ConsistencyTokenTests {
    static let baseURL = URL(string: "http://receipts.invalid")!

    @Test("no token before a write; then each write's token, the newest, goes with the four replica reads and no other call")
    func keptAndSent() async throws {
        let transport = TokenTransport()
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", transport: transport)
        _ = try await receipts.unreadCounts(for: "bob")
        #expect(receipts.consistencyToken == nil)

        transport.answerWrites(with: "r1.00000000016B3748")
        let message = try await receipts.send("Hi!", in: "team", from: "alice")
        #expect(receipts.consistencyToken == "r1.00000000016B3748")
        try await Self.readEverything(with: receipts, message: message.id)
        #expect(transport.takeSent() == [
            .init("getUnread", token: nil), .init("sendMessage", token: nil),
            .init("getUnread", token: "r1.00000000016B3748"), .init("getChat", token: "r1.00000000016B3748"),
            .init("listMessages", token: "r1.00000000016B3748"), .init("getMessage", token: "r1.00000000016B3748"),
            .init("getTenantSettings", token: nil),
        ])

        // Every write method: the token received last is the one held.
        transport.answerWrites(with: "r1.00000000016B3790")
        try await receipts.markMessagesAsRead(chatID: "team", messageIDs: [message.id], by: "bob")
        #expect(receipts.consistencyToken == "r1.00000000016B3790")
        transport.answerWrites(with: "r1.00000000016B37A0")
        try await receipts.editMessage(message.id, in: "team", text: "Hello!")
        #expect(receipts.consistencyToken == "r1.00000000016B37A0")
        transport.answerWrites(with: "r1.00000000016B37B8")
        try await receipts.deleteMessage(message.id, in: "team")
        #expect(receipts.consistencyToken == "r1.00000000016B37B8")
        _ = try await receipts.chat("team")
        #expect(transport.takeSent().last == .init("getChat", token: "r1.00000000016B37B8"))
    }

    @Test("a write answered without a token, or with an error, and any read's answer leave the token held as it was")
    func onlySuccessfulWritesReplaceIt() async throws {
        let transport = TokenTransport()
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", configuration: .init(retry: .never), transport: transport)
        transport.answerWrites(with: "r1.0000000000000010")
        try await receipts.markChatAsRead(chatID: "team", by: "bob")

        transport.answerWrites(with: nil)
        try await receipts.markChatAsRead(chatID: "team", by: "bob")
        #expect(receipts.consistencyToken == "r1.0000000000000010")
        transport.answerWrites(with: "r1.0000000000000020", status: .conflict)
        await #expect(throws: ReceiptsError.self) { try await receipts.send("Hi!", in: "team", from: "alice", id: "m1") }
        #expect(receipts.consistencyToken == "r1.0000000000000010")
        // The transport puts a token on read answers too; a read is no write.
        _ = try await receipts.unreadCounts(for: "bob")
        #expect(receipts.consistencyToken == "r1.0000000000000010")
        #expect(transport.takeSent().last == .init("getUnread", token: "r1.0000000000000010"))
    }

    @Test("copies of a client share its token; another client adopts it; a token set on the request itself is kept")
    func sharedAndAdopted() async throws {
        let transport = TokenTransport()
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", transport: transport)
        let copy = receipts
        transport.answerWrites(with: "r1.0000000000000A00")
        try await copy.markChatAsRead(chatID: "team", by: "bob")
        #expect(receipts.consistencyToken == "r1.0000000000000A00")

        let device = ReceiptsClient(baseURL: Self.baseURL, credential: "user token", transport: transport)
        #expect(device.consistencyToken == nil)
        device.adoptConsistencyToken(try #require(receipts.consistencyToken))
        #expect(device.consistencyToken == "r1.0000000000000A00")
        _ = try await device.unreadCounts(for: "bob")
        // An older position adopted leaves the newer one held; a newer one replaces it, and the
        // next write's replaces that in turn.
        device.adoptConsistencyToken("r1.0000000000000900")
        _ = try await device.messages(in: "team")
        device.adoptConsistencyToken("r1.0000000000000A80")
        _ = try await device.messages(in: "team")
        transport.answerWrites(with: "r1.0000000000000B00")
        try await device.markChatAsRead(chatID: "team", by: "bob")
        _ = try await device.messages(in: "team")
        #expect(receipts.consistencyToken == "r1.0000000000000A00", "each client holds its own")

        let explicit = try await device.generated.getChat(path: .init(chatId: "team"), headers: .init(receiptsConsistencyToken: "r1.0000000000000001"))
        _ = try explicit.ok
        #expect(transport.takeSent().suffix(6) == [
            .init("getUnread", token: "r1.0000000000000A00"), .init("listMessages", token: "r1.0000000000000A00"),
            .init("listMessages", token: "r1.0000000000000A80"), .init("markRead", token: nil),
            .init("listMessages", token: "r1.0000000000000B00"), .init("getChat", token: "r1.0000000000000001"),
        ])
    }

    @Test("concurrent writes answered in any order: the token held is the latest position; the next write's replaces it")
    func concurrentWrites() async throws {
        let transport = TokenTransport(numberingWrites: true)
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", transport: transport)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask { try await receipts.markChatAsRead(chatID: "team", by: "bob") }
            }
            try await group.waitForAll()
        }
        let held = try #require(receipts.consistencyToken)
        #expect(transport.answeredTokens.count == 50)
        #expect(held == transport.answeredTokens.max())
        try await receipts.markChatAsRead(chatID: "team", by: "bob")
        #expect(receipts.consistencyToken == "r1.0000000000000033")
    }

    @Test("against the service: whatever token a write's answer carries is held and sent back, and the service takes it")
    func againstTheService() async throws {
        try await ReceiptsService.with { service in
            let headers = HeaderRecorder()
            let receipts = try await service.tenantClient(middlewares: [headers])
            #expect(receipts.consistencyToken == nil)
            try await receipts.createChat("team", members: ["alice", "bob"])
            let message = try await receipts.send("Hi!", in: "team", from: "alice")
            let answered = headers.answeredTokens
            #expect(answered.count == 2)
            // Nil while the service sends no tokens (no replicas); then the newest.
            #expect(receipts.consistencyToken == answered.last ?? nil)
            try await Self.readEverything(with: receipts, message: message.id)
            let token = receipts.consistencyToken
            #expect(headers.sentTokens == [token, token, token, token, nil])
        }
    }

    /// The four reads a standby may serve, and one that is not among them.
    static func readEverything(with receipts: ReceiptsClient, message: String) async throws {
        _ = try await receipts.unreadCounts(for: "bob")
        _ = try await receipts.chat("team")
        _ = try await receipts.messages(in: "team", viewer: "alice")
        _ = try await receipts.receipt(of: message, in: "team", viewer: "alice")
        _ = try await receipts.allowedOrigins()
    }
}

/// Answers as the service does for the calls these tests make, a given token on each write's
/// answer (or none), and writes down each request's operation and the token it sent.
final class TokenTransport: ClientTransport, Sendable {
    struct Sent: Equatable, CustomStringConvertible {
        var operation: String
        var token: String?

        init(_ operation: String, token: String?) {
            self.operation = operation
            self.token = token
        }

        var description: String { "\(operation)(\(token ?? "-"))" }
    }

    private struct State {
        var sent: [Sent] = []
        var writeToken: String?
        var writeStatus: HTTPResponse.Status = .ok
        var numberingWrites: Bool
        var writes = 0
        var answeredTokens: [String] = []
    }

    private let state: Mutex<State>

    /// - Parameter numberingWrites: answer each write with a token of its own, counting up.
    init(numberingWrites: Bool = false) { state = Mutex(State(numberingWrites: numberingWrites)) }

    /// From now on writes are answered `status` with `token` (nil: no header).
    func answerWrites(with token: String?, status: HTTPResponse.Status = .ok) {
        state.withLock {
            $0.writeToken = token
            $0.writeStatus = status
        }
    }

    /// The requests sent since the last call.
    func takeSent() -> [Sent] {
        state.withLock { state in
            defer { state.sent = [] }
            return state.sent
        }
    }

    /// The tokens writes were answered with, in the order answered.
    var answeredTokens: [String] { state.withLock { $0.answeredTokens } }

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        let isWrite = request.method != .get
        let (token, status) = state.withLock { state -> (String?, HTTPResponse.Status) in
            state.sent.append(Sent(operationID, token: request.headerFields[HTTPField.Name("Receipts-Consistency-Token")!]))
            guard isWrite else { return ("r1.FFFFFFFFFFFFFFFF", .ok) }
            state.writes += 1
            let token = state.numberingWrites ? "r1." + String(format: "%016llX", state.writes) : state.writeToken
            if let token { state.answeredTokens.append(token) }
            return (token, state.writeStatus)
        }
        let answer: (HTTPResponse, HTTPBody?) =
            if status.code >= 400 {
                ScriptedAnswer.json(#"{"error":{"code":"conflict","message":"no"}}"#, status: status)
            } else if operationID == "deleteMessage" {
                (HTTPResponse(status: .noContent), nil)
            } else {
                ScriptedAnswer.json(Self.body(of: operationID), status: status)
            }
        var response = answer.0
        if let token { response.headerFields[HTTPField.Name("Receipts-Consistency-Token")!] = token }
        return (response, answer.1)
    }

    /// A 200 body of the operation, as the service would answer it.
    static func body(of operationID: String) -> String {
        let message = #"""
            {"id":"m1","chatId":"team","seq":1,"senderId":"alice","text":"Hi!","threadId":null,"mentions":[],\#
            "createdAt":"2025-01-01T00:00:00.000Z","editedAt":null,"readBy":[],"deliveredTo":[]}
            """#
        return switch operationID {
        case "getUnread": #"{"total":0,"badge":"","mentions":0,"mentionsBadge":"","chats":[]}"#
        case "getChat": #"{"id":"team","kind":"group","members":[],"createdAt":"2025-01-01T00:00:00.000Z"}"#
        case "listMessages": #"{"messages":[\#(message)]}"#
        case "getTenantSettings": #"{"allowedOrigins":[]}"#
        case "markRead": #"{"marked":1,"unreadCount":0}"#
        default: message  // sendMessage, getMessage, editMessage
        }
    }
}

/// Writes down, innermost (as sent and as answered), the token each read sent and each
/// write's answer carried.
final class HeaderRecorder: ClientMiddleware, Sendable {
    private let recorded = Mutex<(sent: [String?], answered: [String?])>(([], []))

    /// The token of each GET, in order.
    var sentTokens: [String?] { recorded.withLock { $0.sent } }
    /// The token of each other request's answer, in order.
    var answeredTokens: [String?] { recorded.withLock { $0.answered } }

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let name = HTTPField.Name("Receipts-Consistency-Token")!
        let (response, responseBody) = try await next(request, body, baseURL)
        recorded.withLock {
            if request.method == .get {
                $0.sent.append(request.headerFields[name])
            } else {
                $0.answered.append(response.headerFields[name])
            }
        }
        return (response, responseBody)
    }
}
