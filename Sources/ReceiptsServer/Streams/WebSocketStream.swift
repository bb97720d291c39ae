import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket
import ReceiptsCore
import ReceiptsJSON
import ReceiptsLive
import ReceiptsStore

/// The request context of the WebSocket router, which decides an upgrade: the caller and
/// where their stream starts, settled before the handshake response.
public struct ReceiptsWebSocketContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by `StreamStartMiddleware`.
    var stream: OpeningStream?
    /// Where the route leaves an accepted stream for the upgrade (the context is a value, and
    /// the router's own copy is gone once it answered).
    let accepted = AcceptedStream()

    public init(source: Source) {
        self.coreContext = .init(source: source)
    }
}

/// The stream a WebSocket upgrade accepted, handed from the router to the upgrade.
final class AcceptedStream: Sendable {
    private let stream = NIOLockedValueBox<OpeningStream?>(nil)

    func accept(_ stream: OpeningStream) {
        self.stream.withLockedValue { $0 = stream }
    }

    func take() -> OpeningStream? {
        self.stream.withLockedValue { stream in
            defer { stream = nil }
            return stream
        }
    }
}

/// What the WebSocket stream needs beyond the hub and the store.
struct StreamGuards: Sendable {
    let authenticator: Authenticator
    let limiter: StreamLimiter
    /// The web origins each tenant allows: a browser's upgrade from another is refused.
    let origins: OriginPolicy
    /// Ends a stream when its credential stops being valid.
    let credentials: StreamCredentialWatch
    /// The streams held by NIO handlers, whose ends a shutdown waits for.
    let openStreams: OpenStreams
}

/// `GET /v1/stream`: the event stream over WebSocket.
///
/// One event per text frame. `?after=<id>` resumes. The client may send
/// `{"type":"delivered","chatId","messageIds":[…]}` to acknowledge delivery as its user; when
/// the database cannot record one, the client gets `{"type":"delivered.failed","chatId",
/// "messageIds","error":{"code","message"}}` (no `id`: it is no event of the log) and may send
/// it again. Client frames over 64 KiB close the socket with 1009, and messages of several
/// frames are taken up to 1 MiB.
///
/// The upgrade is decided by the WebSocket router (`addRoutes(to:)`: the caller, the origin,
/// the stream caps, where the stream starts); `EventStreamChannel` answers a refusal with the
/// router's status and error JSON. After the handshake the socket is held by NIO handlers
/// alone (`WebSocketStreamHandler`), with no task while the stream is live.
struct WebSocketStream: Sendable {
    /// The answer to `GET /v1/stream` without a WebSocket upgrade: 426, naming the protocol
    /// to upgrade to (RFC 9110, 15.5.22).
    static var upgradeRequired: APIError {
        APIError(
            .upgradeRequired, .upgradeRequired, "GET /v1/stream is a WebSocket: send an upgrade request (GET /v1/events is the same stream as Server-Sent Events)",
            headers: [.upgrade: "websocket"]
        )
    }

    let hub: EventHub
    let store: ReceiptsStore
    let guards: StreamGuards

    /// What the streams it holds share (`WebSocketStreamHandler`).
    var held: HeldStreams { HeldStreams(hub: self.hub, open: self.guards.openStreams) }

    /// The route that decides an upgrade: it answers 200 (and leaves the stream in the
    /// context's `accepted`) when the stream may open; any refusal is an `APIError`.
    func addRoutes(to router: Router<ReceiptsWebSocketContext>) {
        router.add(middleware: ErrorMiddleware())
        router.group("v1/stream")
            .add(middleware: StreamStartMiddleware(guards: self.guards, hub: self.hub))
            .get { _, context -> Response in
                guard let stream = context.stream else { throw APIError(.internalServerError, .internalError, "internal error") }
                context.accepted.accept(stream)
                return Response(status: .ok)
            }
    }

    private struct DeliveryAcknowledgement: Decodable {
        let type: String
        let chatId: String
        let messageIds: [String]
    }

    /// `{"type":"delivered.failed","chatId":…,"messageIds":[…],"error":{"code":…,"message":…}}`
    struct DeliveryFailure: Encodable {
        let type = "delivered.failed"
        let chatId: String
        let messageIds: [String]
        let error: Detail

        struct Detail: Encodable {
            let code: String
            let message: String
        }

        init(chatId: String, messageIds: [String], error: APIError) {
            self.chatId = chatId
            self.messageIds = messageIds
            self.error = Detail(code: error.code.rawValue, message: error.message)
        }

        var json: String {
            get throws {
                var json = JSONWriter(capacity: 160 + self.messageIds.count * 24)
                try json.encode(self)
                return json.text
            }
        }
    }

    /// Marks delivery for a `{"type":"delivered",…}` message of a user token; anything else,
    /// and chats the user is not in, are ignored.
    ///
    /// - Returns: the `delivered.failed` message to send when the database could not record
    ///   it (logged), else nil.
    @Sendable func acknowledgeDelivery(_ text: String, principal: Principal, logger: Logger) async -> String? {
        guard let user = principal.tokenUser,
            let acknowledgement = try? JSONDecoder().decode(DeliveryAcknowledgement.self, from: Data(text.utf8)),
            acknowledgement.type == "delivered", Identifier.isValid(acknowledgement.chatId),
            let ids = try? Validation.messageIds(acknowledgement.messageIds)
        else { return nil }
        do {
            _ = try await self.store.markDelivered(
                tenant: principal.tenantId, chat: acknowledgement.chatId, user: user, target: .messages(ids))
            return nil
        } catch {
            logger.warning(
                "recording a delivery sent over a WebSocket failed",
                metadata: [
                    "receipts.tenant_id": "\(principal.tenantId)", "receipts.chat_id": "\(acknowledgement.chatId)",
                    "error": "\(String(reflecting: type(of: error)))",
                ])
            let failure = DeliveryFailure(
                chatId: acknowledgement.chatId, messageIds: acknowledgement.messageIds,
                error: APIError(.serviceUnavailable, .unavailable, "the delivery was not recorded; send it again"))
            return try? failure.json
        }
    }
}

/// Authenticates a stream request (`Authorization`, or `?token=` with a user token, as browsers
/// cannot set headers on WebSocket), refuses a browser's upgrade from an origin the tenant
/// does not allow (403: browsers apply no CORS to WebSocket, the server must), takes its
/// place under the stream caps, and resolves where it starts (`?after=`); any refusal is
/// answered before the upgrade.
struct StreamStartMiddleware: RouterMiddleware {
    typealias Context = ReceiptsWebSocketContext
    let guards: StreamGuards
    let hub: EventHub

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let credential = Authenticator.credential(of: request) else {
            throw APIError.unauthorized("missing bearer credential or token parameter (a user token; API keys go in the Authorization header)")
        }
        var context = context
        let principal = try await self.guards.authenticator.principal(for: credential)
        if let origin = OriginPolicy.browserOrigin(of: request.headers),
            try await !self.guards.origins.allows(origin, authority: request.head.authority, tenant: principal.tenantId)
        {
            throw OriginPolicy.refusal(of: origin)
        }
        let permit = try self.guards.limiter.admit(principal)
        let start = try await self.hub.start(tenant: principal.tenantId, after: request.uri.queryParameters.get("after"))
        let streamCredential = await StreamCredential(credential: credential, principal: principal)
        context.stream = OpeningStream(
            principal: principal, start: start, permit: permit, watchCredential: self.guards.credentials.watching(streamCredential))
        return try await next(request, context)
    }
}
