import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import ReceiptsServer
import ServiceLifecycle
import TestSupport
import Testing

/// The real service (HTTP server, PostgreSQL) for one test, with a client that speaks JSON.
enum TestService {
    static let adminToken = "test-admin-token"

    static func configuration(adminToken: String? = TestService.adminToken) -> ReceiptsConfiguration {
        var configuration = ReceiptsConfiguration(
            port: 0,
            databaseURL: TestDatabase.url,
            adminToken: adminToken,
            databasePoolSize: 4,
            migrationsDirectory: TestDatabase.packageRoot.appendingPathComponent("sql/migrations")
        )
        configuration.instanceName = TestDatabase.uniqueName("receiptsd")
        return configuration
    }

    /// Runs `body` against a freshly built service listening on a free port.
    static func run(
        adminToken: String? = TestService.adminToken,
        configure: (inout ReceiptsConfiguration) -> Void = { _ in },
        _ body: @Sendable (APIClient) async throws -> Void
    ) async throws {
        var configuration = configuration(adminToken: adminToken)
        configure(&configuration)
        let app = try await buildApplication(configuration, logger: TestDatabase.logger)
        let instanceName = configuration.instanceName
        try await app.test(.live) { client in
            let client = APIClient(client: client, instanceName: instanceName)
            try await client.waitUntilReady()
            try await body(client)
        }
    }

    /// Runs `body` against a service of its own in a `ServiceGroup`, as `receiptsd serve` runs
    /// it, with a new tenant's API key and a way to begin the group's graceful shutdown;
    /// returns once the group has ended.
    static func runInServiceGroup(
        _ body: @Sendable (_ port: Int, _ apiKey: String, _ shutDown: @escaping @Sendable () async -> Void) async throws -> Void
    ) async throws {
        var configuration = configuration()
        configuration.port = Int.random(in: 20_000...32_000)
        let app = try await buildApplication(configuration, logger: TestDatabase.logger)
        let services = ServiceGroup(configuration: .init(services: [app], logger: TestDatabase.logger))
        let port = configuration.port
        let base = "http://127.0.0.1:\(port)"
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await services.run() }
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline {
                let ready = try? await HTTPClient.shared.execute(HTTPClientRequest(url: base + "/readyz"), timeout: .milliseconds(500))
                if ready?.status == .ok { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            let apiKey = try #require(
                try await GracefulShutdownTests.send(.POST, base + "/admin/v1/tenants", as: Self.adminToken, json: #"{"name":"shutdown"}"#)["apiKey"]
                    as? String)
            try await body(port, apiKey) { await services.triggerGracefulShutdown() }
            try await tasks.waitForAll()
        }
    }
}

/// An HTTP answer: status and JSON body.
struct APIResponse: Sendable {
    let status: HTTPResponse.Status
    let body: String
    let contentType: String?
    var headers: HTTPFields = [:]

    /// The body as a JSON object.
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(self.body.utf8))) as? [String: Any] ?? [:]
    }

    /// The `error.code` of an error answer.
    var errorCode: String? {
        (self.json["error"] as? [String: Any])?["code"] as? String
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(self.body.utf8))
    }
}

/// A client of the running service.
struct APIClient: Sendable {
    let client: any TestClientProtocol
    /// The service's `application_name` in `pg_stat_activity`.
    var instanceName = "receiptsd"

    /// The port the service listens on.
    var port: Int { self.client.port! }

    func request(
        _ method: HTTPRequest.Method,
        _ path: String,
        as credential: String?,
        body: String? = nil,
        headers extraHeaders: HTTPFields = [:]
    ) async throws -> APIResponse {
        var headers = extraHeaders
        if let credential { headers[.authorization] = "Bearer \(credential)" }
        if body != nil, headers[.contentType] == nil { headers[.contentType] = "application/json" }
        return try await self.client.execute(
            uri: path,
            method: method,
            headers: headers,
            body: body.map { ByteBuffer(string: $0) }
        ) { response in
            APIResponse(
                status: response.status, body: String(buffer: response.body), contentType: response.headers[.contentType],
                headers: response.headers)
        }
    }

    func request(_ method: HTTPRequest.Method, _ path: String, as credential: String?, json: [String: Any]) async throws -> APIResponse {
        let data = try JSONSerialization.data(withJSONObject: json)
        return try await self.request(method, path, as: credential, body: String(decoding: data, as: UTF8.self))
    }

    /// Waits until `/readyz` answers 200 (the event listener connects while the port is
    /// already open), as an orchestrator would before sending traffic.
    func waitUntilReady(within limit: Duration = .seconds(15)) async throws {
        let deadline = ContinuousClock.now + limit
        while try await self.request(.get, "/readyz", as: nil).status != .ok {
            guard ContinuousClock.now < deadline else {
                Issue.record("the service was not ready within \(limit)")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Creates a tenant through the admin API: every test has its own.
    func createTenant(name: String = "Test tenant") async throws -> TestTenant {
        var response = try await self.request(.post, "/admin/v1/tenants", as: TestService.adminToken, json: ["name": name])
        // Often a new service's first database work: while the whole suite starts at once on
        // two cores, its first connection may not open within the request's 5 s, and the
        // service answers 503 `unavailable`, which tells a client to retry. Setup retries,
        // as a client would (a tenant made by an attempt that answered late is left unused).
        for _ in 0..<2 where response.status == .serviceUnavailable {
            try await Task.sleep(for: .milliseconds(500))
            response = try await self.request(.post, "/admin/v1/tenants", as: TestService.adminToken, json: ["name": name])
        }
        try #require(response.status == .created, "creating a tenant: \(response.status) \(response.body)")
        let tenant = try response.decode(TestTenant.Created.self)
        return TestTenant(id: tenant.id, apiKey: tenant.apiKey, client: self)
    }
}

/// A tenant of the test, with shortcuts for the calls most tests make.
struct TestTenant: Sendable {
    struct Created: Decodable {
        let id: String
        let name: String
        let apiKey: String
    }

    let id: String
    let apiKey: String
    let client: APIClient

    @discardableResult
    func createChat(_ chat: String, kind: String = "group", members: [String]) async throws -> APIResponse {
        let response = try await self.client.request(.put, "/v1/chats/\(chat)", as: self.apiKey, json: ["kind": kind, "members": members])
        try #require(response.status == .created, "creating chat \(chat): \(response.status) \(response.body)")
        return response
    }

    /// Sends a message and returns its id.
    @discardableResult
    func send(in chat: String, from sender: String, text: String = "hello", id: String? = nil) async throws -> String {
        var body: [String: Any] = ["senderId": sender, "text": text]
        if let id { body["id"] = id }
        let response = try await self.client.request(.post, "/v1/chats/\(chat)/messages", as: self.apiKey, json: body)
        try #require(response.status == .created, "sending: \(response.status) \(response.body)")
        return try response.decode(TestMessage.self).id
    }

    @discardableResult
    func read(in chat: String, by user: String, _ extra: [String: Any] = [:]) async throws -> TestMarkResult {
        let response = try await self.client.request(
            .post, "/v1/chats/\(chat)/read", as: self.apiKey, json: extra.merging(["userId": user]) { $1 })
        try #require(response.status == .ok, "reading: \(response.status) \(response.body)")
        return try response.decode(TestMarkResult.self)
    }

    @discardableResult
    func deliver(in chat: String, to user: String, _ extra: [String: Any] = [:]) async throws -> TestMarkResult {
        let response = try await self.client.request(
            .post, "/v1/chats/\(chat)/delivered", as: self.apiKey, json: extra.merging(["userId": user]) { $1 })
        try #require(response.status == .ok, "delivering: \(response.status) \(response.body)")
        return try response.decode(TestMarkResult.self)
    }

    /// A message as its sender sees it (single-message endpoint, with recipients).
    func message(_ id: String, in chat: String, viewer: String, query: String = "") async throws -> TestMessage {
        let response = try await self.client.request(.get, "/v1/chats/\(chat)/messages/\(id)?viewer=\(viewer)\(query)", as: self.apiKey)
        try #require(response.status == .ok, "getting message: \(response.status) \(response.body)")
        return try response.decode(TestMessage.self)
    }

    /// The chat's messages as `viewer` sees them.
    func messages(in chat: String, viewer: String, query: String = "") async throws -> [TestMessage] {
        let response = try await self.client.request(.get, "/v1/chats/\(chat)/messages?viewer=\(viewer)\(query)", as: self.apiKey)
        try #require(response.status == .ok, "listing: \(response.status) \(response.body)")
        return try response.decode(TestMessageList.self).messages
    }

    func unread(for user: String) async throws -> TestUnreadList {
        let response = try await self.client.request(.get, "/v1/users/\(user)/unread", as: self.apiKey)
        try #require(response.status == .ok, "unread: \(response.status) \(response.body)")
        return try response.decode(TestUnreadList.self)
    }

    func token(for user: String, ttlSeconds: Int? = nil) async throws -> String {
        var body: [String: Any] = ["userId": user]
        if let ttlSeconds { body["ttlSeconds"] = ttlSeconds }
        let response = try await self.client.request(.post, "/v1/tokens", as: self.apiKey, json: body)
        try #require(response.status == .created, "token: \(response.status) \(response.body)")
        return try response.decode(TestToken.self).token
    }

    func setReadReceipts(_ user: String, _ enabled: Bool) async throws {
        let response = try await self.client.request(.put, "/v1/users/\(user)/settings", as: self.apiKey, json: ["readReceipts": enabled])
        try #require(response.status == .ok, "settings: \(response.status) \(response.body)")
    }
}

// The contract's JSON shapes, decoded strictly by name.

struct TestMessage: Decodable {
    let id: String
    let chatId: String
    let seq: Int
    let senderId: String
    let text: String
    let threadId: String?
    let mentions: [String]
    let createdAt: String
    let editedAt: String?
    let readBy: [String]
    let deliveredTo: [String]
    let thread: TestThreadSummary?
    let receipt: TestReceipt?
    let recipients: [TestRecipient]?
}

struct TestThreadSummary: Decodable, Equatable {
    let replies: Int
    let lastReplyAt: String
}

struct TestReceipt: Decodable, Equatable {
    let state: String
    let recipients: Int
    let delivered: Int
    let read: Int
    let readAt: String?
    let label: String?
}

struct TestRecipient: Decodable {
    let userId: String
    let deliveredAt: String?
    let readAt: String?
}

struct TestMessageList: Decodable {
    let messages: [TestMessage]
}

struct TestMarkResult: Decodable {
    let marked: Int
    let unreadCount: Int?
}

struct TestUnreadList: Decodable {
    struct Chat: Decodable, Equatable {
        let chatId: String
        let unreadCount: Int
        let badge: String
        let markedUnread: Bool
        var mentions = 0
        var muted = false
        var threads: [Thread] = []
    }

    struct Thread: Decodable, Equatable {
        let threadId: String
        let unreadCount: Int
        let mentions: Int
    }

    let total: Int
    let badge: String
    let mentions: Int
    let mentionsBadge: String
    let chats: [Chat]

    func count(in chat: String) -> Int {
        self.chats.first { $0.chatId == chat }?.unreadCount ?? 0
    }

    func mentions(in chat: String) -> Int {
        self.chats.first { $0.chatId == chat }?.mentions ?? 0
    }
}

struct TestChat: Decodable {
    struct Member: Decodable {
        let userId: String
        let joinedAt: String
    }

    let id: String
    let kind: String
    let members: [Member]
    let createdAt: String
}

struct TestToken: Decodable {
    let token: String
    let expiresAt: String
}
