import Foundation
import HTTPTypes
import OpenAPIRuntime
import ReceiptsClient
import Synchronization
import Testing

/// Retries after a 503, through the client's whole middleware chain, with a transport that
/// answers as the service does while PostgreSQL is away (`{"error":{"code":"unavailable"}}`)
/// a given number of times. (The real service's 503 needs PostgreSQL stopped; the server's
/// DatabaseFaultTests do that. Here the point is what the client does with the answer.)
@Suite("ReceiptsClient retries")
struct RetryPolicyTests {
    static let policy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(5), maximumDelay: .milliseconds(10))

    @Test("an idempotent call after 503s succeeds when the service answers within the attempts")
    func idempotentCallRecovers() async throws {
        let transport = ScriptedTransport(unavailableAnswers: 2)
        let receipts = ReceiptsClient(
            baseURL: URL(string: "http://receipts.invalid")!, credential: "key", configuration: .init(retry: Self.policy), transport: transport)
        let unread = try await receipts.unreadCounts(for: "bob")
        #expect(unread.total == 0)
        #expect(transport.attempts == ["getUnread", "getUnread", "getUnread"])
    }

    @Test("after the last attempt the caller gets unavailable; a call that is not idempotent is tried once")
    func boundedAndOnlyIdempotent() async throws {
        let transport = ScriptedTransport(unavailableAnswers: 10)
        let receipts = ReceiptsClient(
            baseURL: URL(string: "http://receipts.invalid")!, credential: "key", configuration: .init(retry: Self.policy), transport: transport)
        let exhausted = await #expect(throws: ReceiptsError.self) { try await receipts.unreadCounts(for: "bob") }
        #expect(exhausted?.code == .unavailable && exhausted?.status == 503)
        let once = await #expect(throws: ReceiptsError.self) { try await receipts.userToken(for: "bob") }
        #expect(once?.code == .unavailable)
        #expect(transport.attempts == ["getUnread", "getUnread", "getUnread", "createToken"])
    }
}

/// Answers 503 `unavailable` for the first `unavailableAnswers` requests, then an empty
/// unread list; records each request's operation.
final class ScriptedTransport: ClientTransport, Sendable {
    private let state: Mutex<(remaining: Int, attempts: [String])>

    init(unavailableAnswers: Int) { state = Mutex((unavailableAnswers, [])) }

    var attempts: [String] { state.withLock { $0.attempts } }

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        let unavailable = state.withLock { state in
            state.attempts.append(operationID)
            defer { state.remaining -= 1 }
            return state.remaining > 0
        }
        if unavailable { return ScriptedAnswer.unavailable }
        return ScriptedAnswer.json(#"{"total":0,"badge":"","mentions":0,"mentionsBadge":"","chats":[]}"#)
    }
}
