import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

/// A webhook receiver for tests: a small HTTP server on loopback that records every request
/// (headers, raw body, when it came) and answers as scripted: 200 unless told otherwise.
final class WebhookReceiver: Sendable {
    /// How the receiver answers a request.
    enum Answer: Sendable {
        case status(Int)
        /// A status with a `Retry-After` header of this value.
        case retryAfter(Int, String)
        /// No answer at all (the sender's attempt times out).
        case silence
        /// 200, after a pause.
        case delayed(Duration)
    }

    /// One request as received.
    struct Request: Sendable {
        let headers: [String: String]
        let body: [UInt8]
        let receivedAt: ContinuousClock.Instant

        var text: String { String(decoding: self.body, as: UTF8.self) }

        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(self.body))) as? [String: Any] ?? [:]
        }

        /// The events of the batch, in order.
        var events: [[String: Any]] { self.json["events"] as? [[String: Any]] ?? [] }

        var eventIds: [String] { self.events.compactMap { $0["id"] as? String } }

        /// Whether `Receipts-Signature` is valid for `secret`: `t=<unix>,v1=<hex
        /// HMAC-SHA256(secret, "<t>.<body>")>`, checked here with swift-crypto directly, as a
        /// receiver would.
        func isSigned(with secret: String) -> Bool {
            guard let header = self.headers["receipts-signature"] else { return false }
            var fields: [String: String] = [:]
            for part in header.split(separator: ",") {
                let pair = part.split(separator: "=", maxSplits: 1)
                if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
            }
            guard let timestamp = fields["t"], let signature = fields["v1"], Int64(timestamp) != nil else { return false }
            let message = Array("\(timestamp).".utf8) + self.body
            let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Array(secret.utf8)))
            let expected = mac.map { String(format: "%02x", $0) }.joined()
            return expected == signature
        }
    }

    private struct State {
        var requests: [Request] = []
        var script: [Answer] = []
    }

    private let state = NIOLockedValueBox(State())
    private let channel: NIOLockedValueBox<(any Channel)?> = NIOLockedValueBox(nil)
    /// Every connection accepted, for `stop()`.
    private let connections: NIOLockedValueBox<[any Channel]> = NIOLockedValueBox([])

    /// The receiver's URL, e.g. `http://127.0.0.1:40123/hook`.
    let url: String

    /// The port it listens on.
    let port: Int

    private init(port: Int) {
        self.port = port
        self.url = "http://127.0.0.1:\(port)/hook"
    }

    /// Starts a receiver on a free port of 127.0.0.1, or on `port` (a stopped receiver's, to
    /// bring it back).
    static func start(port: Int = 0) async throws -> WebhookReceiver {
        let box = NIOLockedValueBox<WebhookReceiver?>(nil)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let receiver = box.withLockedValue { $0! }
                    receiver.connections.withLockedValue { $0.append(channel) }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(receiver: receiver))
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        let receiver = WebhookReceiver(port: channel.localAddress!.port!)
        box.withLockedValue { $0 = receiver }
        receiver.channel.withLockedValue { $0 = channel }
        return receiver
    }

    /// Stops listening, and closes the connections already open (a sender's kept-alive
    /// connection would otherwise still be answered).
    func stop() async {
        let channel = self.channel.withLockedValue { $0 }
        try? await channel?.close()
        for connection in self.connections.withLockedValue({ $0 }) { try? await connection.close() }
    }

    /// The answers to the next requests, in order; 200 after them.
    func script(_ answers: [Answer]) {
        self.state.withLockedValue { $0.script.append(contentsOf: answers) }
    }

    /// Every request so far.
    var requests: [Request] { self.state.withLockedValue { $0.requests } }

    /// The ids of every event received, in order, repeats included.
    var eventIds: [String] { self.requests.flatMap(\.eventIds) }

    /// Waits until `condition` holds for the requests received (polling), or `limit` passed.
    @discardableResult
    func wait(within limit: Duration = .seconds(15), until condition: ([Request]) -> Bool) async -> [Request] {
        let deadline = ContinuousClock.now + limit
        while true {
            let requests = self.requests
            if condition(requests) || ContinuousClock.now >= deadline { return requests }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits until `count` distinct event ids arrived (or `limit` passed); the distinct ids.
    @discardableResult
    func waitForEvents(_ count: Int, within limit: Duration = .seconds(15)) async -> [String] {
        let requests = await self.wait(within: limit) { Set($0.flatMap(\.eventIds)).count >= count }
        return Self.distinctInOrder(requests.flatMap(\.eventIds))
    }

    static func distinctInOrder(_ ids: [String]) -> [String] {
        var seen = Set<String>()
        return ids.filter { seen.insert($0).inserted }
    }

    fileprivate func received(_ request: Request) -> Answer {
        self.state.withLockedValue { state in
            state.requests.append(request)
            return state.script.isEmpty ? .status(200) : state.script.removeFirst()
        }
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let receiver: WebhookReceiver
        var head: HTTPRequestHead?
        var body: [UInt8] = []

        init(receiver: WebhookReceiver) { self.receiver = receiver }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch self.unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                self.body = []
            case .body(let buffer):
                self.body.append(contentsOf: buffer.readableBytesView)
            case .end:
                var headers: [String: String] = [:]
                for (name, value) in self.head?.headers ?? [:] { headers[name.lowercased()] = value }
                let answer = self.receiver.received(Request(headers: headers, body: self.body, receivedAt: .now))
                switch answer {
                case .retryAfter(let code, let value):
                    self.respond(code, context: context, retryAfter: value)
                case .status(let code):
                    self.respond(code, context: context)
                case .silence:
                    break
                case .delayed(let pause):
                    let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                    context.eventLoop.scheduleTask(in: TimeAmount(pause)) {
                        let (handler, context) = bound.value
                        handler.respond(200, context: context)
                    }
                }
            }
        }

        func respond(_ code: Int, context: ChannelHandlerContext, retryAfter: String? = nil) {
            var responseHeaders = HTTPHeaders()
            // `{}`, typed: an OTLP/HTTP exporter (TracingTests) reads it as an empty answer too.
            responseHeaders.add(name: "Content-Type", value: "application/json")
            responseHeaders.add(name: "Content-Length", value: "2")
            if let retryAfter { responseHeaders.add(name: "Retry-After", value: retryAfter) }
            let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: code), headers: responseHeaders)
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "{}")))), promise: nil)
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
