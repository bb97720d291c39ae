import Foundation
import HTTPTypes
import OpenAPIRuntime
import ReceiptsClient
import Synchronization
import Testing

/// What the client makes of an edit's answers: `editedAt` on a message, the `message.edited`
/// event, and `editMessage` repeated after a 503. A transport answers as the service does
/// (the JSON of docs/api.md), so these run without a service; what the service itself does
/// on an edit is the server's tests' to check.
@Suite("ReceiptsClient and edited messages")
struct EditedMessageTests {
    static let baseURL = URL(string: "http://receipts.invalid")!

    @Test("a message carries editedAt: null until edited, then the time of the edit")
    func editedAt() async throws {
        let transport = EditTransport()
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", transport: transport)
        let before = try await receipts.receipt(of: "m1", in: "team", viewer: "alice")
        #expect(before.text == "Hi Bob" && before.editedAt == nil)
        let edited = try await receipts.editMessage("m1", in: "team", text: "Hi, Bob")
        #expect(edited.text == "Hi, Bob")
        #expect(edited.editedAt == Date(timeIntervalSince1970: 1_764_006_300.25))
        #expect(transport.requests == ["GET /v1/chats/team/messages/m1?viewer=alice", "PATCH /v1/chats/team/messages/m1 text=Hi, Bob"])
    }

    @Test("message.edited arrives as .messageEdited with the sender and the message's id")
    func editedEvent() async throws {
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", transport: EditTransport())
        var events = try await receipts.events().makeAsyncIterator()
        let edited = try #require(try await events.next())
        #expect(edited.kind == .messageEdited)
        #expect(edited.id == "1043" && edited.chatID == "team" && edited.userID == "alice" && edited.messageIDs == ["m1"])
        let deleted = try #require(try await events.next())
        #expect(deleted.kind == .messageDeleted && deleted.messageIDs == ["m1"])
    }

    @Test("editMessage is repeated after a 503: the same text again changes nothing")
    func editIsRetried() async throws {
        let transport = EditTransport(unavailableAnswers: 2)
        let policy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(5), maximumDelay: .milliseconds(10))
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", configuration: .init(retry: policy), transport: transport)
        let edited = try await receipts.editMessage("m1", in: "team", text: "Hi, Bob")
        #expect(edited.editedAt != nil)
        #expect(transport.requests.count == 3)
    }
}

/// Answers as the service does: one message (`GET`, and `PATCH` with the text it was sent),
/// and an event stream of `message.edited` then `message.deleted`; 503 `unavailable` for
/// the first `unavailableAnswers` requests. Records each request's method, path and the
/// `text` of its body.
final class EditTransport: ClientTransport, Sendable {
    private let state: Mutex<(remaining: Int, requests: [String])>

    init(unavailableAnswers: Int = 0) { state = Mutex((unavailableAnswers, [])) }

    var requests: [String] { state.withLock { $0.requests } }

    static func message(text: String, editedAt: String?) -> String {
        let editedAt = editedAt.map { "\"\($0)\"" } ?? "null"
        return #"{"id":"m1","chatId":"team","seq":1,"senderId":"alice","text":"\#(text)","threadId":null,"mentions":[],"createdAt":"2025-11-24T17:42:07.123Z","editedAt":\#(editedAt),"readBy":["bob"],"deliveredTo":["bob"]}"#
    }

    static let events = """
        : receipts event stream

        id: 1043
        data: {"id":"1043","type":"message.edited","chatId":"team","userId":"alice","messageIds":["m1"],"at":"2025-11-24T17:45:00.250Z"}

        id: 1044
        data: {"id":"1044","type":"message.deleted","chatId":"team","userId":"alice","messageIds":["m1"],"at":"2025-11-24T17:46:00.000Z"}


        """

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        var sent: Data?
        if let body { sent = try await Data(collecting: body, upTo: 1 << 20) }
        let text = try sent.map { try JSONDecoder().decode([String: String].self, from: $0)["text"] ?? "" }
        let unavailable = state.withLock { state in
            state.requests.append([request.method.rawValue, request.path ?? "", text.map { "text=\($0)" }].compactMap { $0 }.joined(separator: " "))
            defer { state.remaining -= 1 }
            return state.remaining > 0
        }
        if unavailable { return ScriptedAnswer.unavailable }
        switch operationID {
        case "getMessage":
            return ScriptedAnswer.json(Self.message(text: "Hi Bob", editedAt: nil))
        case "editMessage":
            return ScriptedAnswer.json(Self.message(text: text ?? "", editedAt: "2025-11-24T17:45:00.250Z"))
        case "eventSource":
            return ScriptedAnswer.eventStream(Self.events)
        default:
            return ScriptedAnswer.notFound
        }
    }
}
