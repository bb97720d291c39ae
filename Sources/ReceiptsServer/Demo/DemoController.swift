import Foundation
import Hummingbird
import ReceiptsCore
import ReceiptsStore

/// The live demo page, `/demo`, served only with `RECEIPTS_DEMO=true` and only for the demo
/// tenant (`ReceiptsConfiguration.demoTenant`; docs/web-clients.md, "The demo page").
///
/// The page is plain HTML, CSS and JavaScript (Resources/demo, embedded in the binary, so it
/// works offline and from any copy of `receiptsd`). It uses only the public API, with user
/// tokens: `POST /demo/session`, the one route of its own, sets up the demo chats when they are
/// missing and hands out short-lived tokens of the demo users. The tenant key never leaves
/// the server; the page sends, marks delivered and reads as each user, as a web client
/// would. Anyone who can reach the page gets those tokens: the demo stays off by default,
/// and the route refuses other origins than the service's own.
struct DemoController {
    /// One pane each; `carol` is the third member of the group, with no pane (so the group's
    /// labels show "Read by 1/2").
    static let paneUsers = ["alice", "bob"]
    static let groupChat = (id: "demo-group", members: ["alice", "bob", "carol"])
    static let directChat = (id: "demo-direct", members: ["alice", "bob"])
    /// How long the page's tokens live; it asks for new ones before they expire.
    static let tokenTTL = 1800

    let tenant: String
    let store: ReceiptsStore
    let userTokens: UserTokens

    func addRoutes(to router: Router<ReceiptsRequestContext>) {
        router.get("demo", use: self.page)
        router.get("demo/demo.js") { _, _ in Self.file(DemoFiles.script, type: "text/javascript; charset=utf-8") }
        router.get("demo/demo.css") { _, _ in Self.file(DemoFiles.styleSheet, type: "text/css; charset=utf-8") }
        router.post("demo/session", use: self.session)
    }

    @Sendable func page(_ request: Request, context: ReceiptsRequestContext) async throws -> Response {
        Self.file(DemoFiles.page, type: "text/html; charset=utf-8")
    }

    /// The demo users' tokens and the chats, which it creates when missing.
    @Sendable func session(_ request: Request, context: ReceiptsRequestContext) async throws -> DemoSession {
        if let origin = request.headers[.origin] {
            guard let authority = request.head.authority, WebOrigin(header: origin)?.isSameAuthority(as: authority) == true else {
                throw APIError.forbidden("the demo hands out tokens to its own page only")
            }
        }
        guard try await self.store.credentials.hasTenant(self.tenant) else {
            throw APIError.notFound("the demo tenant \"\(self.tenant)\" does not exist: create it (scripts/run.sh does)")
        }
        for chat in [(Self.groupChat, ChatKind.group), (Self.directChat, ChatKind.direct)] {
            // A chat someone changed stays as it is; the demo's users are added back to the group.
            if try await self.store.putChat(tenant: self.tenant, chat: chat.0.id, kind: chat.1, members: chat.0.members) == .conflict,
                chat.1 == .group
            {
                for user in Self.paneUsers { _ = try await self.store.join(tenant: self.tenant, chat: chat.0.id, user: user) }
            }
        }
        var users: [DemoSession.User] = []
        for user in Self.paneUsers {
            let (token, expiresAt) = try await self.userTokens.mint(tenant: self.tenant, user: user, ttl: Self.tokenTTL)
            users.append(.init(userId: user, token: token, expiresAt: expiresAt))
        }
        return DemoSession(
            tenantId: self.tenant, ttlSeconds: Self.tokenTTL, users: users,
            chats: [
                .init(chatId: Self.groupChat.id, kind: "group", members: Self.groupChat.members),
                .init(chatId: Self.directChat.id, kind: "direct", members: Self.directChat.members),
            ])
    }

    private static func file(_ bytes: [UInt8], type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-cache"
        // Everything from this origin: no CDN, no inline script.
        headers[.contentSecurityPolicy] = "default-src 'self'; img-src 'self' data:"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// `POST /demo/session` answer.
struct DemoSession: ResponseEncodable {
    struct User: Encodable {
        let userId: String
        let token: String
        let expiresAt: Date
    }

    struct Chat: Encodable {
        let chatId: String
        let kind: String
        let members: [String]
    }

    let tenantId: String
    let ttlSeconds: Int
    let users: [User]
    let chats: [Chat]
}

/// The demo page's files (Resources/demo), embedded in the binary.
enum DemoFiles {
    static var page: [UInt8] { PackageResources.index_html }
    static var script: [UInt8] { PackageResources.demo_js }
    static var styleSheet: [UInt8] { PackageResources.demo_css }
}
