import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1

/// Answers a refused WebSocket upgrade with the contract's status and error JSON (401 for a
/// missing or bad credential, 429 over the stream caps, 503 when the database is out), as
/// the same refusal on `/v1/events` is answered.
///
/// hummingbird-websocket 2.8.1 answers every refused upgrade itself, with 400 and an empty
/// body, whatever the WebSocket router answered (`HTTP1WebSocketUpgradeChannel`'s
/// `writeFailedUpgrade`). This middleware, first on the WebSocket router, sees the router's
/// error before that happens and puts an `UpgradeRejectionHandler` carrying it into the
/// connection's pipeline, which turns that 400 into our answer on its way out.
struct UpgradeRejectionMiddleware: RouterMiddleware {
    typealias Context = ReceiptsWebSocketContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            let response = try error.response(from: request, context: context)
            var body = ByteBuffer()
            if case .some(let length) = response.body.contentLength, length > 0 {
                body = try await Self.collect(response.body, upTo: length)
            }
            let handler = UpgradeRejectionHandler(status: error.status, headers: response.headers, body: body)
            try await context.channel.pipeline.addHandler(handler).get()
            throw error
        }
    }

    /// The bytes of a response body (an error body: small, and already in memory).
    private static func collect(_ body: ResponseBody, upTo limit: Int) async throws -> ByteBuffer {
        let collector = BodyCollector()
        try await body.write(collector)
        return collector.buffer
    }

    private final class BodyCollector: ResponseBodyWriter, @unchecked Sendable {
        // Written and read by one task only (the middleware's), one after the other.
        var buffer = ByteBuffer()

        func write(_ buffer: ByteBuffer) async throws {
            var buffer = buffer
            self.buffer.writeBuffer(&buffer)
        }

        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}

/// Replaces the response hummingbird-websocket writes for a refused upgrade (400, empty body)
/// with the refusal our WebSocket router made: its status, headers and JSON body, and
/// `Connection: close` as before. Sits between NIO's HTTP encoder and Hummingbird's codec,
/// where response parts are `HTTPServerResponsePart`s.
final class UpgradeRejectionHandler: ChannelOutboundHandler, RemovableChannelHandler, @unchecked Sendable {
    // A channel handler runs on its channel's event loop only.
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let status: HTTPResponse.Status
    private let headers: HTTPFields
    private let body: ByteBuffer

    init(status: HTTPResponse.Status, headers: HTTPFields, body: ByteBuffer) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.unwrapOutboundIn(data) {
        case .head(let head):
            var replaced = HTTPResponseHead(version: head.version, status: .init(statusCode: self.status.code, reasonPhrase: self.status.reasonPhrase))
            for field in self.headers where field.name != .contentLength && field.name != .connection {
                replaced.headers.add(name: field.name.rawName, value: field.value)
            }
            replaced.headers.replaceOrAdd(name: "content-length", value: String(self.body.readableBytes))
            replaced.headers.replaceOrAdd(name: "connection", value: "close")
            context.write(self.wrapOutboundOut(.head(replaced)), promise: promise)
        case .body:
            // The refused upgrade's response has no body of its own.
            promise?.succeed()
        case .end(let trailers):
            if self.body.readableBytes > 0 {
                context.write(self.wrapOutboundOut(.body(.byteBuffer(self.body))), promise: nil)
            }
            context.write(self.wrapOutboundOut(.end(trailers)), promise: promise)
        }
    }
}
