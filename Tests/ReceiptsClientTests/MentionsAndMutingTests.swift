import Foundation
import HTTPTypes
import OpenAPIRuntime
import ReceiptsClient
import Synchronization
import Testing

/// What the client makes of mentions, muted chats and threads: the bodies `send` and
/// `setMuted` send, `mentions` and `threadId` on a message, the unread answer's `mentions`,
/// `mentionsBadge` and `muted`, `mentions`/`mentionsAll`/`threadId` on `message.created`,
/// `mentions` on `unread.changed`, and a thread's listing. A transport answers as the service
/// does (the JSON of docs/api.md), so these run without a service; what the service itself
/// does is the server's tests' to check (MentionTests, MutedChatTests, ThreadTests).
@Suite("ReceiptsClient, mentions, muted chats and threads")
struct MentionsAndMutingTests {
    static let baseURL = URL(string: "http://receipts.invalid")!

    @Test("send without mentions sends neither member; with them, mentions and mentionsAll; the answer's mentions decode")
    func sendBodies() async throws {
        let transport = MentionTransport()
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", transport: transport)
        let plain = try await receipts.send("Hi", in: "team", from: "alice", id: "m1")
        #expect(plain.mentions == [])
        let named = try await receipts.send("@bob", in: "team", from: "alice", id: "m2", mentions: ["bob", "carol"])
        #expect(named.mentions == ["bob", "carol"])
        let everyone = try await receipts.send("@all", in: "team", from: "alice", id: "m3", mentionsAll: true)
        #expect(everyone.mentions == ["bob", "carol"])
        #expect(plain.threadId == nil && everyone.threadId == nil)
        let reply = try await receipts.send("Noon", in: "team", from: "bob", id: "r1", threadID: "m1")
        #expect(reply.threadId == "m1" && reply.thread == nil)
        #expect(
            transport.bodies == [
                #"{"id":"m1","senderId":"alice","text":"Hi"}"#,
                #"{"id":"m2","mentions":["bob","carol"],"senderId":"alice","text":"@bob"}"#,
                #"{"id":"m3","mentionsAll":true,"senderId":"alice","text":"@all"}"#,
                #"{"id":"r1","senderId":"bob","text":"Noon","threadId":"m1"}"#,
            ])
    }

    @Test("messages(in:) asks for the main timeline, messages(in:thread:) for a thread; threadId and the root's thread summary decode")
    func threadListing() async throws {
        let transport = MentionTransport()
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", transport: transport)
        let main = try await receipts.messages(in: "team", viewer: "alice")
        #expect(main.map(\.id) == ["m1"] && main.first?.threadId == nil)
        let summary = try #require(main.first?.thread)
        #expect(summary.replies == 2)
        #expect(summary.lastReplyAt == Date(timeIntervalSince1970: 1_764_006_300.5))
        let thread = try await receipts.messages(in: "team", viewer: "alice", limit: 10, thread: "m1")
        #expect(thread.map(\.id) == ["r1", "r2"] && thread.allSatisfy { $0.threadId == "m1" && $0.thread == nil })
        #expect(transport.requests == ["GET /v1/chats/team/messages?viewer=alice", "GET /v1/chats/team/messages?viewer=alice&limit=10&thread=m1"])
    }

    @Test("the unread answer decodes mentions, mentionsBadge and per chat mentions, muted and threads")
    func unreadMembers() async throws {
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", transport: MentionTransport())
        let unread = try await receipts.unreadCounts(for: "bob")
        #expect(unread.total == 1 && unread.badge == "1")
        #expect(unread.mentions == 101 && unread.mentionsBadge == "99+")
        #expect(unread.chats.map(\.chatId) == ["loud", "quiet"])
        #expect(unread.chats.map(\.muted) == [false, true])
        #expect(unread.chats.map(\.mentions) == [1, 100])
        #expect(unread.chats.map { $0.threads.map(\.threadId) } == [[], ["m1"]])
        #expect(unread.chats.last?.threads.first?.unreadCount == 3)
    }

    @Test("setMuted puts {\"muted\"} on the member's settings, answers them, and is repeated after a 503")
    func setMuted() async throws {
        let transport = MentionTransport(unavailableAnswers: 1)
        let policy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(5), maximumDelay: .milliseconds(10))
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", configuration: .init(retry: policy), transport: transport)
        let settings = try await receipts.setMuted(true, chat: "quiet", user: "bob")
        #expect(settings.chatId == "quiet" && settings.userId == "bob" && settings.muted)
        #expect(transport.requests == ["PUT /v1/chats/quiet/members/bob/settings", "PUT /v1/chats/quiet/members/bob/settings"])
        #expect(transport.bodies == [#"{"muted":true}"#, #"{"muted":true}"#])
    }

    @Test("message.created carries mentions, and mentionsAll only when the message mentioned everyone")
    func createdEvents() async throws {
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", transport: MentionTransport())
        var events = try await receipts.events().makeAsyncIterator()
        let named = try #require(try await events.next())
        #expect(named.kind == .messageCreated && named.messageIDs == ["m2"])
        #expect(named.mentions == ["bob", "carol"] && !named.mentionsAll)
        let everyone = try #require(try await events.next())
        #expect(everyone.kind == .messageCreated && everyone.mentions == [] && everyone.mentionsAll)
        let read = try #require(try await events.next())
        #expect(read.kind == .receiptRead && read.mentions == [] && !read.mentionsAll)
        #expect(named.threadID == nil && everyone.threadID == nil && read.threadID == nil)
    }

    @Test("message.created of a reply carries its threadId; unread.changed carries the unread mentions as a count, the thread's counts and the user's totals")
    func threadAndUnreadEvents() async throws {
        let receipts = ReceiptsClient(baseURL: Self.baseURL, credential: "key", transport: MentionTransport())
        var events = try await receipts.events().makeAsyncIterator()
        for _ in 0..<3 { _ = try await events.next() }
        let reply = try #require(try await events.next())
        #expect(reply.kind == .messageCreated && reply.messageIDs == ["r1"] && reply.threadID == "m2")
        #expect(reply.mentions == ["alice"] && reply.unreadMentions == 0)
        let unread = try #require(try await events.next())
        #expect(unread.kind == .unreadChanged(unreadCount: 3, markedUnread: false) && unread.userID == "bob")
        #expect(unread.unreadMentions == 2 && unread.mentions == [] && unread.threadID == "m2")
        #expect(unread.threadCounts == .init(unread: 1, mentions: 1))
        #expect(unread.totals == .init(total: 7, badge: "7", mentions: 2, mentionsBadge: "2"))
        #expect(reply.threadCounts == nil && reply.totals == nil)
        #expect(events.lastEventID == "1054")
    }
}

/// Answers as the service does: a sent message with the mentions the body named (or bob and
/// carol for `mentionsAll`) and its `threadId`, a page of the main timeline (a root with its
/// thread's summary) or of a thread (`?thread=`), an unread list with a muted chat, a
/// member's settings, and an event stream of two `message.created`, a `receipt.read`, a
/// reply's `message.created` and an `unread.changed`; 503 `unavailable` for the first
/// `unavailableAnswers` requests. Records each request's method and path and its body (keys
/// sorted).
final class MentionTransport: ClientTransport, Sendable {
    private let state: Mutex<(remaining: Int, requests: [String], bodies: [String])>

    init(unavailableAnswers: Int = 0) { state = Mutex((unavailableAnswers, [], [])) }

    var requests: [String] { state.withLock { $0.requests } }
    var bodies: [String] { state.withLock { $0.bodies } }

    static let unread = """
        {"total":1,"badge":"1","mentions":101,"mentionsBadge":"99+","chats":[\
        {"chatId":"loud","unreadCount":1,"badge":"1","markedUnread":false,"mentions":1,"muted":false,"threads":[]},\
        {"chatId":"quiet","unreadCount":120,"badge":"99+","markedUnread":false,"mentions":100,"muted":true,\
        "threads":[{"threadId":"m1","unreadCount":3,"mentions":1}]}]}
        """

    static let timeline = """
        {"messages":[{"id":"m1","chatId":"team","seq":1,"senderId":"alice","text":"Plan?","threadId":null,"mentions":[],\
        "createdAt":"2025-11-24T17:42:07.123Z","editedAt":null,"readBy":[],"deliveredTo":[],\
        "thread":{"replies":2,"lastReplyAt":"2025-11-24T17:45:00.500Z"}}]}
        """

    static let thread = """
        {"messages":[\
        {"id":"r1","chatId":"team","seq":2,"senderId":"bob","text":"Friday","threadId":"m1","mentions":[],\
        "createdAt":"2025-11-24T17:44:00.000Z","editedAt":null,"readBy":[],"deliveredTo":[]},\
        {"id":"r2","chatId":"team","seq":3,"senderId":"carol","text":"Ok","threadId":"m1","mentions":[],\
        "createdAt":"2025-11-24T17:45:00.500Z","editedAt":null,"readBy":[],"deliveredTo":[]}]}
        """

    static let events = """
        id: 1050
        data: {"id":"1050","type":"message.created","chatId":"team","userId":"alice","messageIds":["m2"],"at":"2025-11-24T17:45:00.250Z","mentions":["bob","carol"],"threadId":null}

        id: 1051
        data: {"id":"1051","type":"message.created","chatId":"team","userId":"alice","messageIds":["m3"],"at":"2025-11-24T17:45:01.000Z","mentions":[],"threadId":null,"mentionsAll":true}

        id: 1052
        data: {"id":"1052","type":"receipt.read","chatId":"team","userId":"bob","messageIds":["m2","m3"],"at":"2025-11-24T17:46:00.000Z"}

        id: 1053
        data: {"id":"1053","type":"message.created","chatId":"team","userId":"bob","messageIds":["r1"],"at":"2025-11-24T17:47:00.000Z","mentions":["alice"],"threadId":"m2"}

        id: 1054
        data: {"id":"1054","type":"unread.changed","chatId":"team","userId":"bob","messageIds":[],"at":"2025-11-24T17:48:00.000Z","mentions":2,"threadId":"m2","unreadCount":3,"markedUnread":false,"threadMentions":1,"threadUnreadCount":1,"total":7,"badge":"7","totalMentions":2,"mentionsBadge":"2"}


        """

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        var json: [String: Any] = [:]
        var sorted: String?
        if let body {
            let data = try await Data(collecting: body, upTo: 1 << 20)
            json = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
            sorted = String(decoding: try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
        }
        let unavailable = state.withLock { state in
            state.requests.append("\(request.method.rawValue) \(request.path ?? "")")
            if let sorted { state.bodies.append(sorted) }
            defer { state.remaining -= 1 }
            return state.remaining > 0
        }
        if unavailable { return ScriptedAnswer.unavailable }
        switch operationID {
        case "sendMessage":
            let mentions = json["mentionsAll"] as? Bool == true ? ["bob", "carol"] : json["mentions"] as? [String] ?? []
            let message: [String: Any] = [
                "id": json["id"] ?? "m", "chatId": "team", "seq": 1, "senderId": json["senderId"] ?? "", "text": json["text"] ?? "",
                "threadId": json["threadId"] ?? NSNull(), "mentions": mentions, "createdAt": "2025-11-24T17:42:07.123Z",
                "editedAt": NSNull(), "readBy": [String](), "deliveredTo": [String](),
            ]
            return ScriptedAnswer.json(String(decoding: try JSONSerialization.data(withJSONObject: message), as: UTF8.self), status: .created)
        case "listMessages":
            let page = request.path?.contains("thread=m1") == true ? Self.thread : Self.timeline
            return ScriptedAnswer.json(page)
        case "getUnread":
            return ScriptedAnswer.json(Self.unread)
        case "putMemberSettings":
            let answer = #"{"chatId":"quiet","userId":"bob","muted":\#(json["muted"] as? Bool ?? false)}"#
            return ScriptedAnswer.json(answer)
        case "eventSource":
            return ScriptedAnswer.eventStream(Self.events)
        default:
            return ScriptedAnswer.notFound
        }
    }
}
