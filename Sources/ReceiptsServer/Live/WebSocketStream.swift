import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOWebSocket
import ReceiptsCore
import ReceiptsStore

/// The request context of the WebSocket router: the caller and where their stream starts,
/// both settled before the handshake response.
public struct ReceiptsWebSocketContext: RequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let webSocket: WebSocketHandlerReference<Self>
    /// The connection: a refused upgrade's answer is put into its pipeline
    /// (`UpgradeRejectionMiddleware`), and so is the shutdown close rewrite.
    let channel: any Channel
    var stream: OpeningStream?

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.webSocket = .init()
        self.channel = source.channel
    }
}

/// A stream that passed its checks before the handshake response: who, from where, its place
/// under the stream caps, and its credential to watch.
struct OpeningStream: Sendable {
    let principal: Principal
    let start: EventHub.Start
    let permit: StreamPermit
    let credential: StreamCredential
}

/// What the WebSocket stream needs beyond the hub and the store.
struct StreamGuards: Sendable {
    let authenticator: Authenticator
    let limiter: StreamLimiter
    let shutdown: StreamShutdown
    /// The web origins each tenant allows: a browser's upgrade from another is refused.
    let origins: OriginPolicy
    /// Ends a stream when its credential stops being valid.
    let credentials: StreamCredentialWatch
}

/// `GET /v1/stream`: the event stream over WebSocket.
///
/// One event per text frame. `?after=<id>` resumes. The client may send
/// `{"type":"delivered","chatId","messageIds":[…]}` to acknowledge delivery as its user; when
/// the database cannot record one, the client gets `{"type":"delivered.failed","chatId",
/// "messageIds","error":{"code","message"}}` (no `id`: it is no event of the log) and may send
/// it again. Client frames over 64 KiB close the socket with 1009 (`serverConfiguration`), and
/// messages of several frames are taken up to 1 MiB.
struct WebSocketStream {
    /// Largest client frame: README, "Limits, timeouts and faults" (hummingbird-websocket's
    /// default is 16 KiB). NIO's frame decoder refuses a larger one with close 1009.
    static let maximumFrameSize = 64 * 1024
    /// Largest message a client may send in several frames.
    static let maximumMessageSize = 1024 * 1024

    /// The WebSocket part of the server configuration. The library's own ping is off:
    /// `WebSocketKeepAlive` pings from the event loop instead.
    static var serverConfiguration: WebSocketServerConfiguration {
        WebSocketServerConfiguration(maxFrameSize: Self.maximumFrameSize, autoPing: .disabled)
    }

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

    func addRoutes(to router: Router<ReceiptsWebSocketContext>) {
        router.add(middleware: UpgradeRejectionMiddleware())
        router.add(middleware: ErrorMiddleware())
        router.group("v1/stream")
            .add(middleware: StreamStartMiddleware(guards: self.guards, hub: self.hub))
            .ws { _, _ in .upgrade([:]) } onUpgrade: { inbound, outbound, context in
                guard let opening = context.requestContext.stream else { return }
                defer { opening.permit.release() }
                try await GoingAwayCloseHandler.install(on: context.requestContext.channel, shutdown: self.guards.shutdown)
                try await WebSocketKeepAlive.install(on: context.requestContext.channel)
                let subscription = await self.hub.subscribe(opening.principal, from: opening.start)
                defer { subscription.cancel() }
                let watch = self.guards.credentials.watch(opening.credential) { self.hub.close(subscription, .credentialEnded) }
                defer { self.guards.credentials.stop(watch) }
                let sink = LiveSink(channel: context.requestContext.channel, framing: .webSocket)
                try await sink.install()
                let reason = try await withThrowingTaskGroup(of: Ending.self) { group -> EventHub.CloseReason? in
                    group.addTask {
                        .closed(try await subscription.relay(to: sink) { _, json in try await outbound.write(.text(json)) })
                    }
                    group.addTask {
                        try await self.acknowledgeDeliveries(from: inbound, to: outbound, principal: opening.principal, logger: context.logger)
                        return .clientLeft
                    }
                    while let ending = try await group.next() {
                        switch ending {
                        case .closed(let reason):
                            group.cancelAll()
                            return reason
                        case .clientLeft:
                            group.cancelAll()
                            return nil
                        }
                    }
                    return nil
                }
                await sink.close()
                if let reason {
                    try await outbound.close(Self.closeCode(for: reason), reason: reason.rawValue)
                }
            }
    }

    /// How one of the stream's tasks ended.
    private enum Ending {
        case closed(EventHub.CloseReason)
        case clientLeft
    }

    /// 1001 when the server goes away; 1008 ("policy violation") when the client must change
    /// something first (keep up, or bring a valid credential).
    static func closeCode(for reason: EventHub.CloseReason) -> WebSocketErrorCode {
        switch reason {
        case .shuttingDown, .historyChanged: .goingAway
        case .tooSlow, .credentialEnded: .policyViolation
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

    /// Marks delivery for `{"type":"delivered",…}` frames of a user token; anything else,
    /// and chats the user is not in, are ignored. A delivery the database could not record is
    /// logged and answered with `delivered.failed`.
    private func acknowledgeDeliveries(
        from inbound: WebSocketInboundStream, to outbound: WebSocketOutboundWriter, principal: Principal, logger: Logger
    ) async throws {
        for try await message in inbound.messages(maxSize: Self.maximumMessageSize) {
            guard case .text(let text) = message, let user = principal.tokenUser,
                let acknowledgement = try? JSONDecoder().decode(DeliveryAcknowledgement.self, from: Data(text.utf8)),
                acknowledgement.type == "delivered", Identifier.isValid(acknowledgement.chatId),
                let ids = try? Validation.messageIds(acknowledgement.messageIds)
            else { continue }
            do {
                _ = try await self.store.markDelivered(
                    tenant: principal.tenantId, chat: acknowledgement.chatId, user: user, target: .messages(ids))
            } catch is CancellationError {
                throw CancellationError()
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
                try await outbound.write(.text(try failure.json))
            }
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
        context.stream = OpeningStream(
            principal: principal, start: start, permit: permit,
            credential: await StreamCredential(credential: credential, principal: principal))
        return try await next(request, context)
    }
}
