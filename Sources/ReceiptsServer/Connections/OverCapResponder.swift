import HTTPTypes
import NIOCore
import NIOHTTP1

/// Answers a connection accepted past the connection cap (`ConnectionSlots`): its first
/// request head gets `/healthz`'s 200, so that a liveness probe sees a live process, or a 503
/// `unavailable` in the contract's shape (`/readyz` too: a full instance is not ready for
/// more), then the connection closes. A connection that sends no complete head within
/// `headTimeout` is closed unanswered. Nothing of the request is read past its head.
final class OverCapResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// The answer to anything but `/healthz`, written once for every refused connection.
    static let refusal: ByteBuffer = {
        let error = APIError(.serviceUnavailable, .unavailable, "the service is at its connection limit; try again shortly")
        return ByteBuffer(string: (try? error.json) ?? #"{"error":{"code":"unavailable","message":"connection limit"}}"#)
    }()
    /// `/healthz`'s answer, as `HealthController` gives it.
    static let healthy = ByteBuffer(string: #"{"status":"ok"}"#)

    private let headTimeout: TimeAmount
    private var timer: Scheduled<Void>?
    private var isAnswered = false

    init(headTimeout: TimeAmount) {
        self.headTimeout = headTimeout
    }

    /// Puts the HTTP/1 codec and the responder into the pipeline of a new connection.
    static func install(on channel: any Channel, headTimeout: TimeAmount) throws {
        let operations = channel.pipeline.syncOperations
        try operations.addHandler(HTTPResponseEncoder())
        try operations.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
        try operations.addHandler(OverCapResponder(headTimeout: headTimeout))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        self.timer = context.eventLoop.scheduleTask(in: self.headTimeout) {
            loopBound.value.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = Self.unwrapInboundIn(data), !self.isAnswered else { return }
        self.isAnswered = true
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let isLivenessProbe = head.method == .GET && path == "/healthz"
        let body = isLivenessProbe ? Self.healthy : Self.refusal
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json; charset=utf-8")
        headers.add(name: "content-length", value: String(body.readableBytes))
        headers.add(name: "connection", value: "close")
        if !isLivenessProbe { headers.add(name: "retry-after", value: "1") }
        let status: HTTPResponseStatus = isLivenessProbe ? .ok : .serviceUnavailable
        context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(Self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(Self.wrapOutboundOut(.end(nil))).whenComplete { _ in
            loopBound.value.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
