import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import ReceiptsLive

/// HTTP/1 with the event streams held by NIO handlers: the WebSocket upgrade
/// (`GET /v1/stream`), and Server-Sent Events (`GET /v1/events`) as a connection's first
/// request.
///
/// Any other connection is served by Hummingbird, as its own HTTP/1 channel does. An upgrade
/// is decided by the WebSocket router (`WebSocketUpgrade`): accepted, the socket is held by
/// NIO handlers alone (`WebSocketStreamHandler`), and the connection's task ends at once;
/// refused, it is answered with the router's status, headers and error JSON (401, 403, 429,
/// 503 as on `/v1/events`), and closed. A first request for `/v1/events` goes through the
/// HTTP router too, and its stream is then held by `EventSourceHandler`.
///
/// It takes the place of hummingbird-websocket's `HTTP1WebSocketUpgradeChannel`, which keeps a
/// task, an async inbound stream and an outbound writer for every socket (about 38 KiB an idle
/// stream against 6 KiB for the socket and its NIO handlers), and answers every refused
/// upgrade 400 with an empty body.
struct EventStreamUpgradeChannel: ServerChildChannel, HTTPChannelHandler {
    /// What became of the connection's first request.
    enum Outcome: Sendable {
        /// Upgraded: its handlers hold the stream.
        case webSocket
        /// `GET /v1/events` first: its handler holds the stream.
        case eventSource
        case http(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        /// An upgrade refused: answered, then closed.
        case refused(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, RouterAnswer)
    }

    struct Value: ServerChildChannelValue {
        let outcome: EventLoopFuture<Outcome>
        let channel: any Channel
    }

    let responder: HTTPChannelHandler.Responder
    let upgrade: WebSocketUpgrade
    let eventSource: EventSourceOpening

    init(responder: @escaping HTTPChannelHandler.Responder, upgrade: WebSocketUpgrade, eventSource: EventSourceOpening) {
        self.responder = Self.redirectingLaterUpgrades(responder)
        self.upgrade = upgrade
        self.eventSource = eventSource
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let decision = NIOLoopBoundBox<WebSocketUpgrade.Decision?>.makeEmptyBox(eventLoop: channel.eventLoop)
            let firstRequest = FirstRequest()
            let firstRequestOnLoop = NIOLoopBound(firstRequest, eventLoop: channel.eventLoop)
            let upgrade = self.upgrade
            let eventSource = self.eventSource
            let upgrader = NIOTypedWebSocketServerUpgrader<Outcome>(
                maxFrameSize: HeldStreams.maximumWebSocketFrameSize,
                shouldUpgrade: { channel, head in
                    let decided = channel.eventLoop.makePromise(of: WebSocketUpgrade.Decision.self)
                    decided.completeWithTask { await upgrade.decide(head, channel: channel, logger: logger) }
                    return decided.futureResult.map { decided in
                        decision.value = decided
                        if case .accept = decided { return HTTPHeaders() }
                        return nil
                    }
                },
                upgradePipelineHandler: { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        guard case .accept(let opening) = decision.value else { throw ChannelError.inappropriateOperationForState }
                        decision.value = nil
                        try upgrade.stream.held.holdWebSocket(
                            on: channel, opening: opening,
                            acknowledgeDelivery: upgrade.stream.acknowledgeDelivery, logger: logger)
                        return .webSocket
                    }
                }
            )
            let upgrades = NIOTypedHTTPServerUpgradeConfiguration<Outcome>(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        if firstRequestOnLoop.value.isEventSource {
                            try channel.pipeline.syncOperations.addHandler(EventSourceHandler(opener: eventSource, logger: logger))
                            return .eventSource
                        }
                        // Idle time is `HTTPConnectionGuard`'s; this closes idle connections on shutdown.
                        try channel.pipeline.syncOperations.addHandler(HTTPConnectionStateHandler(idleTimeout: nil, logger: logger))
                        let http = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                        if case .refuse(let refusal) = decision.value { return .refused(http, refusal) }
                        return .http(http)
                    }
                }
            )
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration<Outcome>(upgradeConfiguration: upgrades)
            configuration.enablePipelining = false  // HTTP is pipelined by NIOAsyncChannel
            configuration.enableErrorHandling = false  // `HTTPConnectionGuard` answers malformed requests
            configuration.enableResponseHeaderValidation = false  // Swift HTTP Types validate them
            let outcome = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
            // Before the upgrader, which decides on the first request: it sees that request's head.
            let upgradeHandler = try channel.pipeline.syncOperations.handler(type: NIOTypedHTTPServerUpgradeHandler<Outcome>.self)
            try channel.pipeline.syncOperations.addHandler(firstRequest, position: .before(upgradeHandler))
            return Value(outcome: outcome, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.outcome.get() {
            case .webSocket, .eventSource:
                return
            case .http(let http):
                await self.handleHTTP(asyncChannel: http, logger: logger)
            case .refused(let http, let refusal):
                await Self.answer(refusal, on: http)
            }
        } catch {
            // The upgrade failed (a malformed handshake) or the connection closed first.
            logger.debug("a connection ended before its first request was served", metadata: ["error": "\(error)"])
            try? await value.channel.close()
        }
    }

    /// Writes the refusal with `Connection: close`, and closes.
    private static func answer(_ refusal: RouterAnswer, on http: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>) async {
        try? await http.executeThenClose { _, outbound in try await outbound.write(contentsOf: refusal.parts) }
    }

    /// An upgrade asked for in a later request of a kept-alive connection (the upgrade is
    /// decided on a connection's first request only) is redirected to the same path with
    /// `Connection: close`, so that the client asks again on a new connection.
    private static func redirectingLaterUpgrades(_ responder: @escaping HTTPChannelHandler.Responder) -> HTTPChannelHandler.Responder {
        struct RedirectedUpgrade: Error {}
        return { request, responseWriter, channel in
            guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                try await responder(request, responseWriter, channel)
                return
            }
            let location = request.uri.query.map { "\(request.uri.path)?\($0)" } ?? request.uri.path
            let response = HTTPResponse(status: .temporaryRedirect, headerFields: [.connection: "close", .location: location])
            try await responseWriter.writeResponse(response)
            throw RedirectedUpgrade()
        }
    }
}

/// Notes whether a connection's first request is one for `EventSourceHandler`
/// (`EventSourceOpening.holds`), then leaves the pipeline.
private final class FirstRequest: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    private(set) var isEventSource = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = self.unwrapInboundIn(data) {
            self.isEventSource = EventSourceOpening.holds(
                method: head.method.rawValue, uri: head.uri, isHTTP11: head.version == .http1_1, upgrade: head.headers.first(name: "upgrade"))
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        context.fireChannelRead(data)
    }
}

/// Decides a WebSocket upgrade with the WebSocket router (`WebSocketStream.addRoutes(to:)`).
struct WebSocketUpgrade: Sendable {
    enum Decision: Sendable {
        case accept(OpeningStream)
        case refuse(RouterAnswer)
    }

    let stream: WebSocketStream
    let respond: @Sendable (Request, ReceiptsWebSocketContext) async throws -> Response

    /// Runs the router on the upgrade request: accepted when it answers 200 with a stream
    /// (`AcceptedStream`); refused with its answer otherwise.
    func decide(_ head: HTTPRequestHead, channel: any Channel, logger: Logger) async -> Decision {
        guard let request = try? HTTPRequest(head, secure: false, splitCookie: false) else {
            return .refuse(RouterAnswer(.invalidRequest("malformed upgrade request")))
        }
        let context = ReceiptsWebSocketContext(source: .init(channel: channel, logger: logger))
        let answer = await RouterAnswer.of(request, logger: logger) { try await self.respond($0, context) }
        if answer.status == .ok, let opening = context.accepted.take() { return .accept(opening) }
        return .refuse(answer)
    }
}

/// A router's answer to a request that opens a stream held by NIO handlers (a WebSocket
/// upgrade, a Server-Sent Events request): its status and headers, and the body of a refusal
/// (an error's JSON).
struct RouterAnswer: Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let body: ByteBuffer

    init(status: HTTPResponse.Status, headers: HTTPFields, body: ByteBuffer) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    init(_ error: APIError) {
        self.init(status: error.status, headers: error.responseHeaders, body: ByteBuffer(string: (try? error.json) ?? ""))
    }

    /// Runs `respond` (a router: it turns the `APIError` of a refusal into its response, as
    /// for any route) on `request`, without a body. Never throws: an error past the router is
    /// answered 500 in the contract's shape.
    static func of(
        _ request: HTTPRequest, logger: Logger, _ respond: (Request) async throws -> Response
    ) async -> RouterAnswer {
        do {
            let response = try await respond(Request(head: request, body: .init(buffer: ByteBuffer())))
            guard response.status != .ok else { return RouterAnswer(status: .ok, headers: response.headers, body: ByteBuffer()) }
            return RouterAnswer(status: response.status, headers: response.headers, body: try await Self.collect(response.body))
        } catch let error as APIError {
            return RouterAnswer(error)
        } catch {
            logger.error("a stream's request failed past the router", metadata: ["error": "\(String(reflecting: type(of: error)))"])
            return RouterAnswer(APIError(.internalServerError, .internalError, "internal error"))
        }
    }

    /// The answer's parts, with `Connection: close` and its length.
    var parts: [HTTPResponsePart] {
        var headers = self.headers
        headers[.connection] = "close"
        headers[.contentLength] = String(self.body.readableBytes)
        var parts: [HTTPResponsePart] = [.head(HTTPResponse(status: self.status, headerFields: headers))]
        if self.body.readableBytes > 0 { parts.append(.body(self.body)) }
        parts.append(.end(nil))
        return parts
    }

    /// The bytes of a response body (an error's JSON: small, and already in memory).
    private static func collect(_ body: ResponseBody) async throws -> ByteBuffer {
        let collector = BodyCollector()
        try await body.write(collector)
        return collector.buffer
    }

    private final class BodyCollector: ResponseBodyWriter, @unchecked Sendable {
        // Written and read by one task only (`of`'s), one after the other.
        var buffer = ByteBuffer()

        func write(_ buffer: ByteBuffer) async throws {
            var buffer = buffer
            self.buffer.writeBuffer(&buffer)
        }

        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
