import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket
import ServiceLifecycle

/// Makes a WebSocket closed by a graceful shutdown say so: 1001 "going away" with our reason,
/// never the 1000 "normal closure" without a reason that hummingbird-websocket sends (README,
/// "Limits, timeouts and faults": on shutdown a WebSocket closes with 1001 and a reason).
///
/// On graceful shutdown, swift-websocket's handler (`WebSocketHandler.handle`) closes every
/// socket with 1000 from its own graceful-shutdown handler, registered when the socket was
/// upgraded, which starts a task that writes the close frame at once; our stream's own close
/// (1001, after the hub ends the subscription) comes later and is then dropped, as a socket
/// closes once. Shutdown handlers run in the order they were registered, and synchronously,
/// so: every connection registers one of its own first (`StreamShutdownChannel`), which only
/// raises this flag; and each WebSocket has a `GoingAwayCloseHandler` in its pipeline that
/// rewrites a close frame with code 1000 sent while the flag is up into 1001 with our reason.
/// The flag is up before any socket's 1000 can be written, so the rewrite does not race.
final class StreamShutdown: Sendable {
    private let shuttingDown = NIOLockedValueBox(false)

    init() {}

    /// Whether the server has begun to shut down.
    var isShuttingDown: Bool { self.shuttingDown.withLockedValue { $0 } }

    func begin() {
        self.shuttingDown.withLockedValue { $0 = true }
    }
}

/// A server child channel that raises `StreamShutdown`'s flag when graceful shutdown begins,
/// before the handlers of what it wraps (see `StreamShutdown`).
struct StreamShutdownChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let shutdown: StreamShutdown

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        self.base.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await withGracefulShutdownHandler {
            await self.base.handle(value: value, logger: logger)
        } onGracefulShutdown: {
            self.shutdown.begin()
        }
    }
}

/// Rewrites the close frame of a WebSocket that the library closes for a graceful shutdown
/// (code 1000) into 1001 "going away" with `EventHub.CloseReason.shuttingDown`'s text. Other
/// close frames (our 1008 and 1001, a 1009 for a frame too large) pass as they are; an echo of
/// a client's own 1000 sent during a shutdown says 1001 too, which tells that client no less.
/// Sits right after NIO's frame encoder, where the frames of the socket's writer and of NIO's
/// protocol-error handler pass.
final class GoingAwayCloseHandler: ChannelOutboundHandler, RemovableChannelHandler, Sendable {
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let shutdown: StreamShutdown

    init(shutdown: StreamShutdown) {
        self.shutdown = shutdown
    }

    /// Puts the handler into a WebSocket's pipeline, after its frame encoder.
    static func install(on channel: any Channel, shutdown: StreamShutdown) async throws {
        try await channel.eventLoop.submit {
            let encoder = try channel.pipeline.syncOperations.handler(type: WebSocketFrameEncoder.self)
            try channel.pipeline.syncOperations.addHandler(GoingAwayCloseHandler(shutdown: shutdown), position: .after(encoder))
        }.get()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = self.unwrapOutboundIn(data)
        guard frame.opcode == .connectionClose, self.shutdown.isShuttingDown,
            frame.data.getInteger(at: frame.data.readerIndex, as: UInt16.self) == 1000
        else {
            context.write(data, promise: promise)
            return
        }
        var payload = context.channel.allocator.buffer(capacity: 2 + EventHub.CloseReason.shuttingDown.rawValue.utf8.count)
        payload.write(webSocketErrorCode: .goingAway)
        payload.writeString(EventHub.CloseReason.shuttingDown.rawValue)
        context.write(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload)), promise: promise)
    }
}
