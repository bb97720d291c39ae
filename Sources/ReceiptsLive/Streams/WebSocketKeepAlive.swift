import NIOCore
import NIOWebSocket

/// Pings an event stream's WebSocket every `interval`, from its event loop, and closes it
/// (1001, "ping timeout") when the ping before got no answer in that time: a client that
/// vanished without closing gives its place back, and proxies see traffic on a quiet stream.
///
/// A ping is one timer of the loop's `SecondTimerWheel` (sockets due in the same second share
/// one scheduled task) and one write, and the pong stops at this handler (hummingbird-websocket's own
/// ping, which this replaced, ran a task for every socket and took each pong through an async
/// stream and an actor: about 100 µs of CPU a ping). Any frame from the client counts as an
/// answer; pings the client sends pass on (`WebSocketStreamHandler` answers them).
final class WebSocketKeepAlive: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// How often a quiet socket is pinged; the same time is left for the answer.
    static let interval = TimeAmount.seconds(30)

    private let interval: TimeAmount
    /// Removed, or the connection closed: the next timer does nothing.
    private var isStopped = false
    /// A ping was sent and nothing has come from the client since.
    private var isAwaitingAnswer = false

    init(interval: TimeAmount = WebSocketKeepAlive.interval) {
        self.interval = interval
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.arm(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.isStopped = true
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.isAwaitingAnswer = false
        guard self.unwrapInboundIn(data).opcode != .pong else { return }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.isStopped = true
        context.fireChannelInactive()
    }

    /// Schedules the next ping at the interval, rounded up to a whole second of the loop's
    /// clock (`SecondTimerWheel`).
    private func arm(context: ChannelHandlerContext) {
        SecondTimerWheel.on(context.eventLoop).schedule(in: self.interval) {
            guard !self.isStopped, context.channel.isActive else { return }
            if self.isAwaitingAnswer {
                var reason = context.channel.allocator.buffer(capacity: 14)
                reason.write(webSocketErrorCode: .goingAway)
                reason.writeString("ping timeout")
                context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: reason)), promise: nil)
                context.close(promise: nil)
                return
            }
            self.isAwaitingAnswer = true
            context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer())), promise: nil)
            self.arm(context: context)
        }
    }
}
