import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A webhook receiver on loopback for the bench: answers every POST 200 at once and notes
/// when each `receipt.read` event's messages arrived, and how many events came in all.
final class BenchWebhookReceiver: Sendable {
    private struct State {
        /// Message id → when the first `receipt.read` naming it arrived.
        var readArrivals: [String: ContinuousClock.Instant] = [:]
        /// Whether bodies are parsed for `readArrivals`; otherwise events are only counted,
        /// so that the receiver (on the same cores) takes as little as it can from the service.
        var tracksReads = true
        var events = 0
        var requests = 0
    }

    private let state = NIOLockedValueBox(State())
    private let channel: NIOLockedValueBox<(any Channel)?> = NIOLockedValueBox(nil)
    private let address = NIOLockedValueBox("")

    /// Where the receiver listens, e.g. `http://127.0.0.1:40123/webhook`.
    var url: String { self.address.withLockedValue { $0 } }

    /// Starts listening on a free port of 127.0.0.1.
    static func start() async throws -> BenchWebhookReceiver {
        let receiver = BenchWebhookReceiver()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(receiver: receiver))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        receiver.address.withLockedValue { $0 = "http://127.0.0.1:\(channel.localAddress!.port!)/webhook" }
        receiver.channel.withLockedValue { $0 = channel }
        return receiver
    }

    func stop() async {
        try? await self.channel.withLockedValue { $0 }?.close()
    }

    /// When the `receipt.read` of `message` arrived, once it has; nil after `limit`.
    func readArrival(of message: String, within limit: Duration) async -> ContinuousClock.Instant? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let arrival = self.state.withLockedValue({ $0.readArrivals[message] }) { return arrival }
            try? await Task.sleep(for: .microseconds(200))
        }
        return nil
    }

    /// Events received so far.
    var eventCount: Int { self.state.withLockedValue { $0.events } }

    /// Stops parsing bodies: from now on events are only counted.
    func stopTrackingReads() {
        self.state.withLockedValue { $0.tracksReads = false }
    }

    fileprivate func received(_ body: [UInt8], at arrival: ContinuousClock.Instant) {
        guard self.state.withLockedValue({ $0.tracksReads }) else {
            // Every event object starts with `{"id":` and nothing else in a batch does.
            let marker = Array(#"{"id":"#.utf8)
            var count = 0
            var index = 0
            while index + marker.count <= body.count {
                if body[index] == marker[0] && body[index..<index + marker.count].elementsEqual(marker) {
                    count += 1
                    index += marker.count
                } else {
                    index += 1
                }
            }
            self.state.withLockedValue { state in
                state.requests += 1
                state.events += count
            }
            return
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let events = object["events"] as? [[String: Any]]
        else { return }
        self.state.withLockedValue { state in
            state.requests += 1
            state.events += events.count
            for event in events where event["type"] as? String == "receipt.read" {
                for message in event["messageIds"] as? [String] ?? [] where state.readArrivals[message] == nil {
                    state.readArrivals[message] = arrival
                }
            }
        }
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let receiver: BenchWebhookReceiver
        var body: [UInt8] = []

        init(receiver: BenchWebhookReceiver) { self.receiver = receiver }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch self.unwrapInboundIn(data) {
            case .head:
                self.body = []
            case .body(let buffer):
                self.body.append(contentsOf: buffer.readableBytesView)
            case .end:
                let arrival = ContinuousClock.now
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "0")
                context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
                self.receiver.received(self.body, at: arrival)
            }
        }
    }
}
