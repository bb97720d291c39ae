import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Many event streams opened on bare NIO channels: WebSockets (`GET /v1/stream`, the
/// handshake written by hand, the server's frames read only far enough to time one event's
/// arrival on every stream, pings answered) or Server-Sent Events (`GET /v1/events`, the
/// body's `data:` lines read as they come).
///
/// The bench shares two cores with the service it measures, and opens up to some 19,000
/// streams: a general WebSocket client (a task and async streams per connection) would cost
/// the bench more than the service spends.
final class StreamProbes: Sendable {
    enum Kind: Sendable {
        case webSocket
        case serverSentEvents
    }

    let kind: Kind
    /// When each stream got the awaited event, for the current `expect(_:)`.
    private let arrivals = NIOLockedValueBox<[ContinuousClock.Instant]>([])
    /// The byte strings an awaited event's frame holds, all of them.
    private let awaited = NIOLockedValueBox<[[UInt8]]>([])
    private let channels = NIOLockedValueBox<[any Channel]>([])
    private let frames = NIOLockedValueBox(0)

    /// The event loops the streams are read on.
    let group: any EventLoopGroup

    init(kind: Kind = .webSocket, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.kind = kind
        self.group = group
    }

    /// Opens one stream from `source` (a loopback address: several spread the connections
    /// over more ports than one address has) with `credential`; returns once the server
    /// answered 101.
    func open(host: String, port: Int, source: String, credential: String) async throws {
        let upgraded = self.group.any().makePromise(of: Void.self)
        let channel = try await ClientBootstrap(group: self.group)
            .bind(to: try SocketAddress(ipAddress: source, port: 0))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    switch self.kind {
                    case .webSocket: try channel.pipeline.syncOperations.addHandler(ProbeHandler(probes: self, upgraded: upgraded))
                    case .serverSentEvents: try channel.pipeline.syncOperations.addHandler(EventSourceProbeHandler(probes: self, opened: upgraded))
                    }
                }
            }
            .connect(host: host, port: port)
            .get()
        self.channels.withLockedValue { $0.append(channel) }
        var key = [UInt8](repeating: 0, count: 16)
        for index in key.indices { key[index] = .random(in: 0...255) }
        let request =
            switch self.kind {
            case .webSocket:
                "GET /v1/stream HTTP/1.1\r\nHost: \(host):\(port)\r\nAuthorization: Bearer \(credential)\r\n"
                    + "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                    + "Sec-WebSocket-Key: \(Data(key).base64EncodedString())\r\n\r\n"
            case .serverSentEvents:
                "GET /v1/events HTTP/1.1\r\nHost: \(host):\(port)\r\nAuthorization: Bearer \(credential)\r\n"
                    + "Accept: text/event-stream\r\n\r\n"
            }
        try await channel.writeAndFlush(ByteBuffer(string: request))
        try await upgraded.futureResult.get()
    }

    /// How many streams are open.
    var openCount: Int { self.channels.withLockedValue { $0.filter(\.isActive).count } }

    /// From now on, times the arrival of a frame that holds every one of `markers`.
    func expect(_ markers: [String]) {
        self.arrivals.withLockedValue { $0 = [] }
        self.awaited.withLockedValue { $0 = markers.map { Array($0.utf8) } }
    }

    /// Text frames (WebSocket) or events (SSE) received on every stream so far.
    var framesReceived: Int { self.frames.withLockedValue { $0 } }

    /// The arrivals so far of what `expect(_:)` awaits.
    var arrivalTimes: [ContinuousClock.Instant] { self.arrivals.withLockedValue { $0 } }

    /// Closes every stream.
    func closeAll() async {
        let channels = self.channels.withLockedValue { channels in
            defer { channels = [] }
            return channels
        }
        for channel in channels { channel.close(promise: nil) }
        for channel in channels { try? await channel.closeFuture.get() }
    }

    fileprivate func received(text payload: [UInt8], at time: ContinuousClock.Instant) {
        self.frames.withLockedValue { $0 += 1 }
        let markers = self.awaited.withLockedValue { $0 }
        guard !markers.isEmpty, markers.allSatisfy({ payload.firstRange(of: $0) != nil }) else { return }
        self.arrivals.withLockedValue { $0.append(time) }
    }
}

/// One stream: the handshake's answer, then the server's frames (unmasked, as a server's are).
private final class ProbeHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let probes: StreamProbes
    private var upgraded: EventLoopPromise<Void>?
    private var buffer = ByteBuffer()

    init(probes: StreamProbes, upgraded: EventLoopPromise<Void>) {
        self.probes = probes
        self.upgraded = upgraded
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let now = ContinuousClock.now
        var bytes = Self.unwrapInboundIn(data)
        self.buffer.writeBuffer(&bytes)
        if let upgraded {
            guard let head = readResponseHead(from: &self.buffer) else { return }
            self.upgraded = nil
            guard head.hasPrefix("HTTP/1.1 101") else {
                upgraded.fail(ProbeFailure(head: head))
                context.close(promise: nil)
                return
            }
            upgraded.succeed()
        }
        while let (opcode, payload) = self.nextFrame() {
            switch opcode {
            case 0x1: self.probes.received(text: payload, at: now)
            case 0x9: context.writeAndFlush(Self.wrapOutboundOut(Self.maskedFrame(opcode: 0xA, payload: payload)), promise: nil)
            case 0x8: context.close(promise: nil)
            default: break
            }
        }
        self.buffer.discardReadBytes()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.upgraded?.fail(ProbeFailure(description: "closed before the upgrade"))
        self.upgraded = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.upgraded?.fail(error)
        self.upgraded = nil
        context.close(promise: nil)
    }

    /// The next whole frame in `buffer` (the service sends events unfragmented), if one is there.
    private func nextFrame() -> (opcode: UInt8, payload: [UInt8])? {
        guard let first = self.buffer.getInteger(at: self.buffer.readerIndex, as: UInt8.self),
            let second = self.buffer.getInteger(at: self.buffer.readerIndex + 1, as: UInt8.self)
        else { return nil }
        var offset = 2
        var length = Int(second & 0x7F)
        if length == 126 {
            guard let extended = self.buffer.getInteger(at: self.buffer.readerIndex + 2, as: UInt16.self) else { return nil }
            length = Int(extended)
            offset = 4
        } else if length == 127 {
            guard let extended = self.buffer.getInteger(at: self.buffer.readerIndex + 2, as: UInt64.self) else { return nil }
            length = Int(extended)
            offset = 10
        }
        guard let payload = self.buffer.getBytes(at: self.buffer.readerIndex + offset, length: length) else { return nil }
        self.buffer.moveReaderIndex(forwardBy: offset + length)
        return (first & 0x0F, payload)
    }

    /// A client frame, masked as RFC 6455 requires of clients.
    private static func maskedFrame(opcode: UInt8, payload: [UInt8]) -> ByteBuffer {
        var frame = ByteBuffer()
        frame.writeInteger(0x80 | opcode)
        frame.writeInteger(0x80 | UInt8(min(payload.count, 125)))
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame.writeBytes(mask)
        frame.writeBytes(payload.prefix(125).enumerated().map { $0.element ^ mask[$0.offset % 4] })
        return frame
    }
}

/// One Server-Sent Events stream: the response head, then the body's `data:` lines (the
/// chunked encoding's size lines are lines of their own and match no awaited event).
private final class EventSourceProbeHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let probes: StreamProbes
    private var opened: EventLoopPromise<Void>?
    private var buffer = ByteBuffer()

    init(probes: StreamProbes, opened: EventLoopPromise<Void>) {
        self.probes = probes
        self.opened = opened
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let now = ContinuousClock.now
        var bytes = Self.unwrapInboundIn(data)
        self.buffer.writeBuffer(&bytes)
        if let opened {
            guard let head = readResponseHead(from: &self.buffer) else { return }
            self.opened = nil
            guard head.hasPrefix("HTTP/1.1 200") else {
                opened.fail(ProbeFailure(head: head))
                context.close(promise: nil)
                return
            }
            opened.succeed()
        }
        let data = Array("data: ".utf8)
        while let newline = self.buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            let line = Array(self.buffer.readableBytesView[self.buffer.readerIndex..<newline])
            self.buffer.moveReaderIndex(to: newline + 1)
            if line.starts(with: data) { self.probes.received(text: line, at: now) }
        }
        self.buffer.discardReadBytes()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.opened?.fail(ProbeFailure(description: "closed before the response head"))
        self.opened = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.opened?.fail(error)
        self.opened = nil
        context.close(promise: nil)
    }
}

/// The response head at the start of `buffer`, read past, once it has all come.
private func readResponseHead(from buffer: inout ByteBuffer) -> String? {
    let view = buffer.readableBytesView
    guard let end = view.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
    let head = String(decoding: view[view.startIndex..<end.lowerBound], as: UTF8.self)
    buffer.moveReaderIndex(forwardBy: end.upperBound - view.startIndex)
    return head
}

struct ProbeFailure: Error, CustomStringConvertible {
    var description: String

    init(description: String) {
        self.description = description
    }

    /// A refusal: the head's status line.
    init(head: String) {
        self.description = head.split(separator: "\r\n").first.map(String.init) ?? "no answer"
    }
}
