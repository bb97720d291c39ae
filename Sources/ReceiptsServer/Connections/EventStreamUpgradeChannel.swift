import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket

/// HTTP/1 with the event stream's WebSocket upgrade (`GET /v1/stream`).
///
/// A connection whose first request is no upgrade is served by Hummingbird, as its own
/// HTTP/1 channel does. An upgrade is decided by the WebSocket router (`WebSocketUpgrade`):
/// accepted, the socket is held by NIO handlers alone (`WebSocketStreamHandler`), and the
/// connection's task ends at once; refused, it is answered with the router's status, headers
/// and error JSON (401, 403, 429, 503 as on `/v1/events`), and closed.
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
        case http(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        /// An upgrade refused: answered, then closed.
        case refused(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, WebSocketUpgrade.Refusal)
    }

    struct Value: ServerChildChannelValue {
        let outcome: EventLoopFuture<Outcome>
        let channel: any Channel
    }

    let responder: HTTPChannelHandler.Responder
    let upgrade: WebSocketUpgrade

    init(responder: @escaping HTTPChannelHandler.Responder, upgrade: WebSocketUpgrade) {
        self.responder = Self.redirectingLaterUpgrades(responder)
        self.upgrade = upgrade
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let decision = NIOLoopBoundBox<WebSocketUpgrade.Decision?>.makeEmptyBox(eventLoop: channel.eventLoop)
            let upgrade = self.upgrade
            let upgrader = NIOTypedWebSocketServerUpgrader<Outcome>(
                maxFrameSize: WebSocketStream.maximumFrameSize,
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
                        try WebSocketStreamHandler.install(on: channel, stream: upgrade.stream, opening: opening, logger: logger)
                        return .webSocket
                    }
                }
            )
            let upgrades = NIOTypedHTTPServerUpgradeConfiguration<Outcome>(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
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
            return Value(outcome: outcome, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.outcome.get() {
            case .webSocket:
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
    private static func answer(_ refusal: WebSocketUpgrade.Refusal, on http: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>) async {
        var headers = refusal.headers
        headers[.connection] = "close"
        headers[.contentLength] = String(refusal.body.readableBytes)
        try? await http.executeThenClose { _, outbound in
            var parts: [HTTPResponsePart] = [.head(HTTPResponse(status: refusal.status, headerFields: headers))]
            if refusal.body.readableBytes > 0 { parts.append(.body(refusal.body)) }
            parts.append(.end(nil))
            try await outbound.write(contentsOf: parts)
        }
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

/// Decides a WebSocket upgrade with the WebSocket router (`WebSocketStream.addRoutes(to:)`).
struct WebSocketUpgrade: Sendable {
    enum Decision: Sendable {
        case accept(OpeningStream)
        case refuse(Refusal)
    }

    /// The router's answer to a refused upgrade: its status, headers and error JSON.
    struct Refusal: Sendable {
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
    }

    let stream: WebSocketStream
    let respond: @Sendable (Request, ReceiptsWebSocketContext) async throws -> Response

    /// Runs the router on the upgrade request: accepted when it answers 200 with a stream
    /// (`AcceptedStream`); refused with its answer otherwise (the router turns the `APIError`
    /// of a refusal into its response, as for any route).
    func decide(_ head: HTTPRequestHead, channel: any Channel, logger: Logger) async -> Decision {
        guard let request = try? HTTPRequest(head, secure: false, splitCookie: false) else {
            return .refuse(Refusal(.invalidRequest("malformed upgrade request")))
        }
        let context = ReceiptsWebSocketContext(source: .init(channel: channel, logger: logger))
        do {
            let response = try await self.respond(Request(head: request, body: .init(buffer: ByteBuffer())), context)
            if response.status == .ok, let opening = context.accepted.take() { return .accept(opening) }
            return .refuse(Refusal(status: response.status, headers: response.headers, body: try await Self.collect(response.body)))
        } catch let error as APIError {
            return .refuse(Refusal(error))
        } catch {
            logger.error("deciding a WebSocket upgrade failed", metadata: ["error": "\(String(reflecting: type(of: error)))"])
            return .refuse(Refusal(APIError(.internalServerError, .internalError, "internal error")))
        }
    }

    /// The bytes of a response body (an error's JSON: small, and already in memory).
    private static func collect(_ body: ResponseBody) async throws -> ByteBuffer {
        let collector = BodyCollector()
        try await body.write(collector)
        return collector.buffer
    }

    private final class BodyCollector: ResponseBodyWriter, @unchecked Sendable {
        // Written and read by one task only (`decide`'s), one after the other.
        var buffer = ByteBuffer()

        func write(_ buffer: ByteBuffer) async throws {
            var buffer = buffer
            self.buffer.writeBuffer(&buffer)
        }

        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
