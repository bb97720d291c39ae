import Logging
import NIOCore
import NIOHTTP1

/// Enforces the connection limits (README, "Limits, timeouts and faults") on one HTTP/1
/// connection: the request-head and idle timeouts, a 400 and a close for a request that does not parse, and a prompt close on
/// shutdown for connections that are idle or still sending a head.
///
/// It sits right after NIO's WebSocket upgrader, from the connection's start (Hummingbird's
/// own `HTTPConnectionStateHandler` is only added once the upgrader has decided against an
/// upgrade): it sees the parse errors of the first request, every request part once the
/// upgrader has passed the first request on, and every response part.
/// `ReceivedBytesHandler`, at the front of the pipeline, tells it when a head starts
/// arriving. One scheduled task per connection re-arms itself to the next deadline of its
/// `ConnectionTimeline`. When a WebSocket upgrade completes both remove themselves, before
/// the first frame passes: a stream may be quiet for long, and `WebSocketKeepAlive` pings it
/// (the WebSocket layer times its own close).
final class HTTPConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The handler to put first in the pipeline; it reports received bytes to this one.
    let receivedBytes = ReceivedBytesHandler()
    private var timeline: ConnectionTimeline
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// Set once the connection is being closed: no timer is armed any more.
    private var isClosing = false
    private var hasClosed = false

    init(limits: ConnectionTimeline.Limits, logger: Logger) {
        self.timeline = ConnectionTimeline(limits: limits, now: .now())
        self.logger = logger
        self.receivedBytes.connectionGuard = self
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.armTimer(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.context = nil
        self.receivedBytes.connectionGuard = nil
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let now = NIODeadline.now()
        var action = ConnectionTimeline.Action.none
        switch Self.unwrapInboundIn(data) {
        case .head(let head):
            let bodyLength = head.headers.contains(name: "transfer-encoding") ? nil : head.headers.first(name: "content-length").map { Int($0) ?? .max } ?? 0
            self.timeline.receivedHead(now: now, keepsAlive: head.isKeepAlive, bodyLength: bodyLength)
        case .body(let bytes): self.timeline.receivedBody(bytes: bytes.readableBytes, now: now)
        case .end: action = self.timeline.receivedEnd(now: now)
        }
        context.fireChannelRead(data)
        self.perform(action, reason: "request read after its answer", context: context)
    }

    /// Bytes arrived, before decoding (from `ReceivedBytesHandler`).
    fileprivate func received(bytes: Int) {
        guard let context else { return }
        self.perform(self.timeline.received(bytes: bytes, now: .now()), reason: "request body too long to drop", context: context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        // A head cut short by our own close.
        guard !self.hasClosed else { return }
        // The decoder stops at a parse error: nothing more can be read from this connection.
        // Not passed on: behind us Hummingbird would answer a second 400, or (before the
        // first request) the pipeline's end would log a client's mistake as an error.
        self.logger.debug("closing a connection whose request does not parse", metadata: ["receipts.error": "\(error)"])
        guard self.timeline.openRequests == 0 else {
            // An answer is under way (the bad request was pipelined behind it): close after it.
            self.perform(self.timeline.quiesce(), reason: "unparsable request", context: context)
            return
        }
        self.isClosing = true
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        headers.add(name: "Content-Length", value: String(Self.malformedRequestBody.readableBytes))
        headers.add(name: "Connection", value: "close")
        context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers))), promise: nil)
        context.write(Self.wrapOutboundOut(.body(.byteBuffer(Self.malformedRequestBody))), promise: nil)
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: written)
        written.futureResult.hop(to: context.eventLoop).assumeIsolated().whenComplete { _ in
            self.close(context: context)
        }
    }

    /// The contract's error shape for a request that is not HTTP.
    private static let malformedRequestBody = ByteBuffer(
        string: #"{"error":{"code":"invalid_request","message":"malformed HTTP request"}}"#
    )

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is ChannelShouldQuiesceEvent:
            self.perform(self.timeline.quiesce(), reason: "server shutting down", context: context)
            context.fireUserInboundEventTriggered(event)
        case is HTTPServerUpgradeEvents:
            // `upgradeComplete`, its only case: from here on the connection carries
            // WebSocket frames, not requests.
            context.fireUserInboundEventTriggered(event)
            context.pipeline.syncOperations.removeHandler(self.receivedBytes, promise: nil)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch Self.unwrapOutboundIn(data) {
        case .head(let head) where head.status.code < 200:
            context.write(data, promise: promise)
        case .head(var head):
            let announcesClose = !head.isKeepAlive
            if self.timeline.sendingResponseHead(announcesClose: announcesClose), !announcesClose {
                head.headers.replaceOrAdd(name: "Connection", value: "close")
                context.write(Self.wrapOutboundOut(.head(head)), promise: promise)
            } else {
                context.write(data, promise: promise)
            }
        case .body:
            context.write(data, promise: promise)
        case .end:
            let action = self.timeline.sentResponseEnd(now: .now())
            guard action == .close else {
                context.write(data, promise: promise)
                self.armTimer(context: context)
                return
            }
            let written = promise ?? context.eventLoop.makePromise(of: Void.self)
            written.futureResult.hop(to: context.eventLoop).assumeIsolated().whenComplete { _ in
                self.close(context: context)
            }
            context.writeAndFlush(data, promise: written)
        }
    }

    // MARK: Deadlines

    private func perform(_ action: ConnectionTimeline.Action, reason: String, context: ChannelHandlerContext) {
        switch action {
        case .none:
            self.armTimer(context: context)
        case .close:
            self.logger.debug("closing a connection", metadata: ["receipts.reason": "\(reason)"])
            self.close(context: context)
        }
    }

    /// Makes sure the timer fires no later than the timeline's deadline. A later deadline
    /// keeps the armed timer, which re-arms itself when it fires: requests on a busy
    /// keep-alive connection cost no scheduling.
    private func armTimer(context: ChannelHandlerContext) {
        guard !self.isClosing, let deadline = self.timeline.deadline else { return }
        if let armed = self.timerDeadline, armed <= deadline { return }
        self.timer?.cancel()
        self.timerDeadline = deadline
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.timer = nil
            self.timerDeadline = nil
            self.perform(self.timeline.timerFired(now: .now()), reason: "request head or idle timeout", context: context)
        }
    }

    private func close(context: ChannelHandlerContext) {
        guard self.context != nil, !self.hasClosed else { return }
        self.hasClosed = true
        self.isClosing = true
        self.timer?.cancel()
        self.timer = nil
        // Announced through the whole pipeline as the end of input first, as when a client
        // goes away: a WebSocket upgrader still waiting for the first request then gives up
        // quietly instead of failing with an error that Hummingbird logs as one.
        context.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        context.close(promise: nil)
    }
}

/// Reports every read to the connection's `HTTPConnectionGuard` before the request decoder
/// sees it: the decoder emits a head only once it is complete, and the head timeout runs
/// from its first byte.
final class ReceivedBytesHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    fileprivate weak var connectionGuard: HTTPConnectionGuard?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.connectionGuard?.received(bytes: Self.unwrapInboundIn(data).readableBytes)
        context.fireChannelRead(data)
    }
}

@available(*, unavailable)
extension HTTPConnectionGuard: Sendable {}

@available(*, unavailable)
extension ReceivedBytesHandler: Sendable {}
