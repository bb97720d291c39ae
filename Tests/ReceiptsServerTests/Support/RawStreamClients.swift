import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOWebSocket
import Testing

/// A WebSocket upgrade request sent over a plain TCP connection, to see exactly what the
/// server answers (a refused upgrade's status and body, which WebSocket clients hide), or to
/// hold a stream open cheaply (after a 101 the connection stays open until `close()`).
struct RawUpgrade {
    let channel: any Channel
    let status: Int
    let head: String
    let body: String
    let received: ReceivedBytes
    /// The length of the answer's head, with the blank line that ends it.
    let headLength: Int

    /// What the server sent after the answer's head (after a 101: WebSocket frames).
    var receivedAfterHead: [UInt8] { Array(self.received.bytes.dropFirst(self.headLength)) }

    /// Whether the server closed the connection.
    var isClosed: Bool { self.received.snapshot.closed }

    /// Sends one WebSocket frame, masked as a client's must be (RFC 6455, 5.3).
    func send(opcode: UInt8, fin: Bool = true, payload: [UInt8]) async throws {
        var frame = ByteBuffer()
        frame.writeInteger(UInt8(fin ? 0x80 : 0) | opcode)
        switch payload.count {
        case ..<126:
            frame.writeInteger(UInt8(0x80 | payload.count))
        case ...Int(UInt16.max):
            frame.writeInteger(UInt8(0x80 | 126))
            frame.writeInteger(UInt16(payload.count))
        default:
            frame.writeInteger(UInt8(0x80 | 127))
            frame.writeInteger(UInt64(payload.count))
        }
        let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        frame.writeBytes(mask)
        frame.writeBytes(payload.enumerated().map { $0.element ^ mask[$0.offset % 4] })
        try await self.channel.writeAndFlush(frame).get()
    }

    /// The `error.code` of a JSON error body.
    var errorCode: String? {
        let object = (try? JSONSerialization.jsonObject(with: Data(self.body.utf8))) as? [String: Any]
        return (object?["error"] as? [String: Any])?["code"] as? String
    }

    /// Sends `GET <path>` with the WebSocket upgrade headers (and `Authorization: Bearer` when
    /// `credential` is given, `Origin` when `origin` is), and reads the answer's head, and its
    /// body when it has one.
    static func open(port: Int, path: String, credential: String? = nil, origin: String? = nil) async throws -> RawUpgrade {
        let received = ReceivedBytes()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(received) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let credential { request += "Authorization: Bearer \(credential)\r\n" }
        if let origin { request += "Origin: \(origin)\r\n" }
        request += "\r\n"
        try await channel.writeAndFlush(ByteBuffer(string: request)).get()
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let (text, closed) = received.snapshot
            if let end = text.range(of: "\r\n\r\n") {
                let head = String(text[..<end.lowerBound])
                let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                let length = head.split(separator: "\r\n").compactMap { line -> Int? in
                    let parts = line.split(separator: ":", maxSplits: 1)
                    guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                    return Int(parts[1].trimmingCharacters(in: .whitespaces))
                }.first ?? 0
                let body = String(text[end.upperBound...])
                if status == 101 || body.utf8.count >= length {
                    return RawUpgrade(
                        channel: channel, status: status, head: head, body: body, received: received,
                        headLength: text[..<end.upperBound].utf8.count)
                }
            }
            if closed { break }
            try await Task.sleep(for: .milliseconds(2))
        }
        try? await channel.close()
        throw Failure(description: "no complete answer to the upgrade request: \(received.snapshot.text)")
    }

    func close() async {
        try? await self.channel.close()
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Collects what the server sends.
    final class ReceivedBytes: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        private let state = NIOLockedValueBox((bytes: [UInt8](), closed: false))

        /// What was received so far as text (bytes that are no UTF-8 replaced), and whether
        /// the connection closed.
        var snapshot: (text: String, closed: Bool) {
            self.state.withLockedValue { (String(decoding: $0.bytes, as: UTF8.self), $0.closed) }
        }

        var bytes: [UInt8] { self.state.withLockedValue { $0.bytes } }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = self.unwrapInboundIn(data)
            self.state.withLockedValue { $0.bytes += buffer.readableBytesView }
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.state.withLockedValue { $0.closed = true }
            context.fireChannelInactive()
        }
    }
}

enum WebSocketProbe {
    static let logger = Logger(label: "websocket-probe")

    /// Opens `GET /v1/stream`, runs `body` with the socket's writer and the text frames
    /// received so far, then waits (at most `limit`) for the server to close the socket, and
    /// returns its close frame (nil when the connection ended without one).
    static func closeFrame(
        port: Int,
        credential: String,
        within limit: Duration = .seconds(10),
        _ body: @escaping @Sendable (WebSocketOutboundWriter, ReceivedEvents) async throws -> Void = { _, _ in }
    ) async throws -> WebSocketCloseFrame? {
        var configuration = WebSocketClientConfiguration(maxFrameSize: 1 << 20)
        configuration.additionalHeaders = [.authorization: "Bearer \(credential)"]
        let received = ReceivedEvents()
        let clientConfiguration = configuration
        return try await withThrowingTaskGroup(of: WebSocketCloseFrame?.self) { group in
            group.addTask {
                try await WebSocketClient.connect(
                    url: "ws://127.0.0.1:\(port)/v1/stream", configuration: clientConfiguration, logger: logger
                ) { inbound, outbound, _ in
                    received.markOpened()
                    try await withThrowingTaskGroup(of: Void.self) { inner in
                        inner.addTask { try await body(outbound, received) }
                        for try await message in inbound.messages(maxSize: 1 << 24) {
                            if case .text(let text) = message { received.receive(text) }
                        }
                        inner.cancelAll()
                    }
                }
            }
            group.addTask {
                try await Task.sleep(for: limit)
                Issue.record("the server did not close the WebSocket within \(limit)")
                return nil
            }
            let frame = try await group.next() ?? nil
            group.cancelAll()
            return frame
        }
    }
}
