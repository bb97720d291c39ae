import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTPTypes
import ReceiptsLive

/// `GET /v1/events` as its connection's first request, held by NIO handlers: no task, no
/// response writer, nothing per stream but this handler's state and its `HeldStream`, while
/// the stream is live.
///
/// The request goes through the HTTP router as any other (`EventSourceOpening`: metrics,
/// CORS, authentication, the stream caps and the resume point, in `EventStreamController`);
/// when the route accepts it, this handler writes the head the router answered and the body:
/// the opening comment, the events (`HeldStream` pulls them when the stream is behind; the hub
/// writes them when it is live), a heartbeat comment every 15 s from the event loop
/// (`LiveSink`), and `: closed: <reason>` when the hub closes the stream. The connection then
/// closes. A refusal is answered with the router's status and error JSON, and the connection
/// closes. A client that closes its side ends the stream at once.
final class EventSourceHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    private let opener: EventSourceOpening
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var isDeciding = false
    /// The server began to shut down before the stream started.
    private var isQuiescing = false
    private var isClosed = false
    private var held: HeldStream?

    init(opener: EventSourceOpening, logger: Logger) {
        self.opener = opener
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.giveBack()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.giveBack()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is ChannelShouldQuiesceEvent:
            self.isQuiescing = true
            self.held?.quiesce()
        case ChannelEvent.inputClosed:
            // The client left (or closed its side): the stream ends, and its place is given
            // back at once.
            context.close(promise: nil)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// The request's head starts the decision; its body (a GET has none) and any later request
    /// on the connection are not read: the stream is the connection's last answer.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let request) = self.unwrapInboundIn(data), !self.isDeciding else { return }
        self.isDeciding = true
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let opener = self.opener
        let channel = context.channel
        let logger = self.logger
        Task {
            let decision = await opener.decide(request, channel: channel, logger: logger)
            channel.eventLoop.execute { handler.value.decided(decision) }
        }
    }

    private func decided(_ decision: EventSourceOpening.Decision) {
        guard let context, !self.isClosed, context.channel.isActive else {
            if case .accept(let opening, _) = decision { opening.permit.release() }
            return
        }
        switch decision {
        case .refuse(let answer):
            for part in answer.parts.dropLast() { context.write(self.wrapOutboundOut(part), promise: nil) }
            context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        case .accept(let opening, let head):
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
            context.writeAndFlush(self.wrapOutboundOut(.body(ByteBuffer(string: ServerSentEventText.opening))), promise: nil)
            // After the head and the first line: the hub and the heartbeats write chunks of the
            // response (HTTP/1.1, chunked: `EventSourceOpening.holds`) next to the socket.
            let sink = LiveSink(channel: context.channel, framing: .serverSentEventChunks, tenant: opening.start.tenant)
            do {
                try sink.install()
            } catch {
                opening.permit.release()
                context.close(promise: nil)
                return
            }
            sink.startHeartbeats(every: EventStreamController.heartbeatInterval)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            let output = HeldStream.Output(
                send: { events in handler.value.send(events) },
                end: { reason in handler.value.end(reason) })
            let held = HeldStream(
                streams: HeldStreams(hub: self.opener.hub, open: self.opener.guards.openStreams), kind: .serverSentEvents, opening: opening, sink: sink, logger: self.logger, output: output)
            self.held = held
            held.start()
            if self.isQuiescing { held.quiesce() }
        }
    }

    /// The events as one body part, flushed: the future completes when the socket took it.
    private func send(_ events: [(id: String, json: String)]) -> EventLoopFuture<Void>? {
        guard let context, !events.isEmpty else { return nil }
        var body = context.channel.allocator.buffer(capacity: events.reduce(0) { $0 + $1.json.utf8.count + 32 })
        for event in events { body.writeString(ServerSentEventText.event(id: event.id, json: event.json)) }
        return context.writeAndFlush(self.wrapOutboundOut(.body(body)))
    }

    /// The hub closed the stream (nil: its events could not be read): the closing comment, the
    /// response's end, and the connection closes.
    private func end(_ reason: EventHub.CloseReason?) {
        guard let context else { return }
        if let reason {
            context.write(self.wrapOutboundOut(.body(ByteBuffer(string: ServerSentEventText.closed(reason)))), promise: nil)
        }
        context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    private func giveBack() {
        self.isClosed = true
        self.held?.giveBack()
    }
}

/// Decides a Server-Sent Events request that NIO handlers will hold, with the HTTP router
/// (`buildRouter`): the route answers only the head (`ReceiptsRequestContext.heldStream`).
struct EventSourceOpening: Sendable {
    enum Decision: Sendable {
        case accept(OpeningStream, HTTPResponse)
        case refuse(RouterAnswer)
    }

    let hub: EventHub
    let guards: StreamGuards
    let respond: @Sendable (Request, ReceiptsRequestContext) async throws -> Response

    func decide(_ request: HTTPRequest, channel: any Channel, logger: Logger) async -> Decision {
        var context = ReceiptsRequestContext(source: .init(channel: channel, logger: logger))
        let accepted = AcceptedStream()
        context.heldStream = accepted
        let routed = context
        let answer = await RouterAnswer.of(request, logger: logger) { try await self.respond($0, routed) }
        if answer.status == .ok, let opening = accepted.take() {
            // The route's empty body said `Content-Length: 0`; the stream's body has no length.
            var headers = answer.headers
            headers[.contentLength] = nil
            return .accept(opening, HTTPResponse(status: .ok, headerFields: headers))
        }
        return .refuse(answer)
    }

    /// Whether a connection's first request is one to hold: an HTTP/1.1 `GET /v1/events` (any
    /// query), with no upgrade asked. HTTP/1.1, so that the response is chunked (no length),
    /// which the hub's writes next to the socket rely on (`LiveSink.Framing`).
    static func holds(method: String, uri: String, isHTTP11: Bool, upgrade: String?) -> Bool {
        guard method == "GET", isHTTP11, upgrade == nil else { return false }
        let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return path == "/v1/events"
    }
}
