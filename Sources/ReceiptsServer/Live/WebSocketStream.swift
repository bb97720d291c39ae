import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOWebSocket
import ReceiptsCore
import ReceiptsStore

/// The request context of the WebSocket router: the caller and where their stream starts,
/// both settled before the handshake response.
public struct ReceiptsWebSocketContext: RequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let webSocket: WebSocketHandlerReference<Self>
    var principal: Principal?
    var start: EventHub.Start?

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.webSocket = .init()
    }
}

/// `GET /v1/stream`: the event stream over WebSocket.
///
/// One event per text frame. `?after=<id>` resumes. The client may send
/// `{"type":"delivered","chatId","messageIds":[…]}` to acknowledge delivery as its user.
struct WebSocketStream {
    let hub: EventHub
    let store: ReceiptsStore
    let authenticator: Authenticator

    func addRoutes(to router: Router<ReceiptsWebSocketContext>) {
        router.add(middleware: ErrorMiddleware())
        router.group("v1/stream")
            .add(middleware: StreamStartMiddleware(authenticator: self.authenticator, hub: self.hub))
            .ws { _, _ in .upgrade([:]) } onUpgrade: { inbound, outbound, context in
                guard let principal = context.requestContext.principal, let start = context.requestContext.start else { return }
                let subscription = await self.hub.subscribe(principal, from: start)
                defer { subscription.cancel() }
                let reason = try await withThrowingTaskGroup(of: EventHub.CloseReason?.self) { group in
                    group.addTask {
                        try await subscription.relay { _, json in try await outbound.write(.text(json)) }
                    }
                    group.addTask {
                        try await self.acknowledgeDeliveries(from: inbound, principal: principal)
                        return nil
                    }
                    let first = try await group.next() ?? nil
                    group.cancelAll()
                    return first
                }
                if let reason {
                    try await outbound.close(reason == .tooSlow ? .policyViolation : .goingAway, reason: reason.rawValue)
                }
            }
    }

    private struct DeliveryAcknowledgement: Decodable {
        let type: String
        let chatId: String
        let messageIds: [String]
    }

    /// Marks delivery for `{"type":"delivered",…}` frames of a user token; anything else,
    /// and chats the user is not in, are ignored.
    private func acknowledgeDeliveries(from inbound: WebSocketInboundStream, principal: Principal) async throws {
        for try await message in inbound.messages(maxSize: 1 << 20) {
            guard case .text(let text) = message, let user = principal.tokenUser,
                let acknowledgement = try? JSONDecoder().decode(DeliveryAcknowledgement.self, from: Data(text.utf8)),
                acknowledgement.type == "delivered", Identifier.isValid(acknowledgement.chatId),
                let ids = try? Validation.messageIds(acknowledgement.messageIds)
            else { continue }
            _ = try? await self.store.markDelivered(
                tenant: principal.tenantId, chat: acknowledgement.chatId, user: user, target: .messages(ids))
        }
    }
}

/// Authenticates a stream request (`Authorization` or `?token=`, as browsers cannot set
/// headers on WebSocket) and resolves where it starts (`?after=`).
struct StreamStartMiddleware: RouterMiddleware {
    typealias Context = ReceiptsWebSocketContext
    let authenticator: Authenticator
    let hub: EventHub

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let credential = Authenticator.credential(of: request) else {
            throw APIError.unauthorized("missing bearer credential or token parameter")
        }
        var context = context
        let principal = try await self.authenticator.principal(for: credential)
        context.principal = principal
        context.start = try await self.hub.start(tenant: principal.tenantId, after: request.uri.queryParameters.get("after"))
        return try await next(request, context)
    }
}
