import DequeModule
import NIOCore
import NIOHTTP1
import NIOPosix

/// One keep-alive HTTP/1.1 connection to the service, for the bench's own requests.
///
/// The bench runs on the same two cores as the service and PostgreSQL, so every bit of CPU
/// its client spends is taken from what it measures. A general-purpose client (redirects,
/// tracing, connection-pool state machines) was about 40 % of the bench's CPU in the
/// throughput figures (BENCHMARKS.md); this one writes a request and collects its answer.
final class LoopbackConnection: Sendable {
    private let channel: any Channel

    private init(channel: any Channel) {
        self.channel = channel
    }

    static func connect(host: String, port: Int) async throws -> LoopbackConnection {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // The bench writes only headers it built itself: no need to check them.
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(enableOutboundHeaderValidation: false)
                    try channel.pipeline.syncOperations.addHandler(ExchangeHandler())
                }
            }
            .connect(host: host, port: port)
            .get()
        return LoopbackConnection(channel: channel)
    }

    var isActive: Bool { self.channel.isActive }

    /// Sends one request and waits for its whole answer.
    func exchange(_ head: HTTPRequestHead, body: ByteBuffer?) async throws -> (status: Int, body: ByteBuffer) {
        let answer = self.channel.eventLoop.makePromise(of: (status: Int, body: ByteBuffer).self)
        self.channel.writeAndFlush(ExchangeHandler.Request(head: head, body: body, answer: answer), promise: nil)
        return try await answer.futureResult.get()
    }

    func close() async {
        try? await self.channel.close()
    }
}

/// Writes each request's parts and completes its promise with the answer, in order.
private final class ExchangeHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = Request
    typealias OutboundOut = HTTPClientRequestPart

    struct Request: Sendable {
        var head: HTTPRequestHead
        var body: ByteBuffer?
        var answer: EventLoopPromise<(status: Int, body: ByteBuffer)>
    }

    private var waiting: Deque<EventLoopPromise<(status: Int, body: ByteBuffer)>> = []
    private var status = 0
    private var body = ByteBuffer()

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = self.unwrapOutboundIn(data)
        self.waiting.append(request.answer)
        context.write(self.wrapOutboundOut(.head(request.head)), promise: nil)
        if let body = request.body { context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.write(self.wrapOutboundOut(.end(nil)), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.status = Int(head.status.code)
        case .body(var part):
            self.body.writeBuffer(&part)
        case .end:
            self.waiting.popFirst()?.succeed((self.status, self.body))
            self.body = ByteBuffer()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.failAll(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.failAll(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    private func failAll(_ error: any Error) {
        while let answer = self.waiting.popFirst() { answer.fail(error) }
    }
}
