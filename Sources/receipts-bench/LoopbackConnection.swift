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
    /// An answer: its status, its headers, and its body (empty on a connection that drops
    /// bodies). The headers are the parsed head's own value, kept without copying.
    struct Answer: Sendable {
        let status: Int
        let headers: HTTPHeaders
        let body: ByteBuffer

        var retryAfter: String? { self.headers.first(name: "Retry-After") }
    }

    private let channel: any Channel

    private init(channel: any Channel) {
        self.channel = channel
    }

    /// - Parameter keepsBodies: false for a client that floods the service and reads no
    ///   answer: it should not spend the CPU it shares with the service on bodies.
    static func connect(
        host: String, port: Int, keepsBodies: Bool = true, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> LoopbackConnection {
        let channel = try await ClientBootstrap(group: group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // The bench writes only headers it built itself: no need to check them.
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(enableOutboundHeaderValidation: false)
                    try channel.pipeline.syncOperations.addHandler(ExchangeHandler(keepsBodies: keepsBodies))
                }
            }
            .connect(host: host, port: port)
            .get()
        return LoopbackConnection(channel: channel)
    }

    var isActive: Bool { self.channel.isActive }

    /// Sends one request and waits for its whole answer.
    func exchange(_ head: HTTPRequestHead, body: ByteBuffer?) async throws -> Answer {
        let answer = self.channel.eventLoop.makePromise(of: Answer.self)
        self.channel.writeAndFlush(ExchangeHandler.Request(head: head, body: body, answer: answer), promise: nil)
        return try await answer.futureResult.get()
    }

    /// Sends one request and waits for its whole answer for at most `timeout`: past it the
    /// connection is closed, and the wait fails.
    func exchange(_ head: HTTPRequestHead, body: ByteBuffer?, timeout: TimeAmount) async throws -> Answer {
        let channel = self.channel
        let closing = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        defer { closing.cancel() }
        return try await self.exchange(head, body: body)
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
        var answer: EventLoopPromise<LoopbackConnection.Answer>
    }

    private let keepsBodies: Bool
    private var waiting: Deque<EventLoopPromise<LoopbackConnection.Answer>> = []
    private var status = 0
    private var headers = HTTPHeaders()
    private var body = ByteBuffer()

    init(keepsBodies: Bool) {
        self.keepsBodies = keepsBodies
    }

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
            self.headers = head.headers
        case .body(var part):
            if self.keepsBodies { self.body.writeBuffer(&part) }
        case .end:
            self.waiting.popFirst()?.succeed(LoopbackConnection.Answer(status: self.status, headers: self.headers, body: self.body))
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
