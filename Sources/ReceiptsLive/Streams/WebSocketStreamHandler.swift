import Logging
import NIOCore
import NIOWebSocket
import ReceiptsCore

/// An event stream's WebSocket after the handshake, held by NIO handlers alone: no task, no
/// async stream, nothing per socket but this handler's state and its `HeldStream`, while the
/// stream is live.
///
/// - **Events**: one text frame each (`HeldStream` pulls them when the stream is behind; the
///   hub writes them next to the socket when it is live).
/// - **The client's messages.** Delivery acknowledgements are recorded one at a time, in
///   order, by a task of their own; the socket is not read meanwhile (TCP holds the client
///   back). Pings are answered with pongs; a close is answered with a close, and the
///   connection closes.
/// - **Closes.** When the hub closes the stream, a close frame with the code and reason
///   (`closeCode(for:)`; 1011 when its events could not be read) is its last
///   frame, and the connection closes when the client answers, or after `closeTimeout`. A
///   server that begins a graceful shutdown tells each connection
///   (`ChannelShouldQuiesceEvent`): the stream closes with 1001 and the reason.
final class WebSocketStreamHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// How long the client has to answer the server's close frame.
    static let closeTimeout = TimeAmount.seconds(5)
    /// Largest message a client may send in several frames.
    static let maximumMessageSize = 1024 * 1024

    private let streams: HeldStreams
    private let opening: OpeningStream
    private let acknowledgeDelivery: HeldStreams.AcknowledgeDelivery
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var held: HeldStream?
    /// Text messages not yet taken up, and whether a task records one now. Bounded by what
    /// the reads before the socket stopped being read carried (a few reads of at most 64 KiB).
    private var acknowledgements: [String] = []
    private var isAcknowledging = false
    private var closeTimer: Scheduled<Void>?

    init(streams: HeldStreams, opening: OpeningStream, acknowledgeDelivery: @escaping HeldStreams.AcknowledgeDelivery, logger: Logger) {
        self.streams = streams
        self.opening = opening
        self.acknowledgeDelivery = acknowledgeDelivery
        self.logger = logger
    }

    /// Puts the stream's handlers after the frame codec that the upgrade added: pings
    /// (`WebSocketKeepAlive`), messages of several frames joined up to
    /// `maximumMessageSize`, then this handler. On the channel's event loop.
    static func install(
        on channel: any Channel, streams: HeldStreams, opening: OpeningStream, acknowledgeDelivery: @escaping HeldStreams.AcknowledgeDelivery, logger: Logger
    ) throws {
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(WebSocketKeepAlive())
        try pipeline.addHandler(
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 256, maxAccumulatedFrameSize: Self.maximumMessageSize))
        try pipeline.addHandler(WebSocketStreamHandler(streams: streams, opening: opening, acknowledgeDelivery: acknowledgeDelivery, logger: logger))
    }

    private var isOpen: Bool { self.held?.isOpen ?? false }

    // MARK: - The connection

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let sink = LiveSink(channel: context.channel, framing: .webSocket, tenant: self.opening.start.tenant)
        do {
            // Added by the upgrade, on an open connection.
            guard context.channel.isActive else { throw ChannelError.ioOnClosedChannel }
            try sink.install()
        } catch {
            self.opening.permit.release()
            context.close(promise: nil)
            return
        }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let output = HeldStream.Output(
            send: { events in handler.value.send(events) },
            end: { reason in handler.value.close(reason) })
        let held = HeldStream(streams: self.streams, kind: .webSocket, opening: self.opening, sink: sink, logger: self.logger, output: output)
        self.held = held
        held.start()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.giveBack()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.giveBack()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is ChannelShouldQuiesceEvent:
            self.held?.quiesce()
        case ChannelEvent.inputClosed:
            // The client closed its side (the server's connections allow half-closure): it
            // reads no more either.
            context.close(promise: nil)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error {
        case NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge, NIOWebSocketFrameAggregator.Error.tooManyFragments:
            self.closeIfOpen(.messageTooLarge, reason: "a message may take at most 1 MiB")
        case is NIOWebSocketFrameAggregator.Error:
            self.closeIfOpen(.protocolError, reason: "malformed fragmented message")
        default:
            // An I/O error: the connection is of no more use.
            context.close(promise: nil)
        }
    }

    private func giveBack() {
        self.closeTimer?.cancel()
        self.closeTimer = nil
        if let held {
            held.giveBack()
        }
    }

    // MARK: - The client's frames

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        switch frame.opcode {
        case .connectionClose:
            self.answerClose(frame, context: context)
        case .ping where self.isOpen:
            context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .text where self.isOpen && self.opening.principal.tokenUser != nil:
            // Only a user's messages mean anything (a delivery acknowledgement).
            self.acknowledgements.append(String(buffer: frame.unmaskedData))
            self.acknowledgeNext()
        default:
            break
        }
    }

    /// The client closes: a close frame back with its code (1000 when it gave none), then the
    /// connection closes. The answer to the server's own close ends the wait for it.
    private func answerClose(_ frame: WebSocketFrame, context: ChannelHandlerContext) {
        guard self.isOpen else {
            context.close(promise: nil)
            return
        }
        self.held?.stopSending()
        var data = frame.unmaskedData
        let code = data.readWebSocketErrorCode() ?? .normalClosure
        var answer = context.channel.allocator.buffer(capacity: 2)
        answer.write(webSocketErrorCode: code)
        context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: answer))).assumeIsolated()
            .whenComplete { _ in context.close(promise: nil) }
    }

    /// Records the oldest acknowledgement not yet taken up, in a task; the socket is not read
    /// until every one is done (`acknowledged(failure:)`).
    private func acknowledgeNext() {
        guard !self.isAcknowledging, self.isOpen, let context, !self.acknowledgements.isEmpty else { return }
        let text = self.acknowledgements.removeFirst()
        self.isAcknowledging = true
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let acknowledgeDelivery = self.acknowledgeDelivery
        let principal = self.opening.principal
        let logger = self.logger
        let loop = context.eventLoop
        Task {
            let failure = await acknowledgeDelivery(text, principal, logger)
            loop.execute { handler.value.acknowledged(failure: failure) }
        }
    }

    private func acknowledged(failure: String?) {
        self.isAcknowledging = false
        guard self.isOpen, let context else { return }
        if let failure {
            context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: failure))), promise: nil)
        }
        if self.acknowledgements.isEmpty {
            context.channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in }
        } else {
            self.acknowledgeNext()
        }
    }

    // MARK: - The server's frames

    /// One text frame an event, flushed: the future completes when the socket took them.
    private func send(_ events: [(id: String, json: String)]) -> EventLoopFuture<Void>? {
        guard let context, let last = events.last else { return nil }
        for event in events.dropLast() {
            context.write(self.wrapOutboundOut(Self.text(event.json)), promise: nil)
        }
        return context.writeAndFlush(self.wrapOutboundOut(Self.text(last.json)))
    }

    private static func text(_ json: String) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: json))
    }

    /// The hub closed the stream (nil: its events could not be read).
    private func close(_ reason: EventHub.CloseReason?) {
        if let reason {
            self.writeClose(Self.closeCode(for: reason), reason: reason.rawValue)
        } else {
            self.writeClose(.unexpectedServerError, reason: "the events could not be read; reconnect with the last id to resume")
        }
    }

    /// Ends the stream from this side (a message the server refuses).
    private func closeIfOpen(_ code: WebSocketErrorCode, reason: String) {
        guard self.isOpen else { return }
        self.held?.stopSending()
        self.writeClose(code, reason: reason)
    }

    /// Sends a close frame, and closes the connection when the client answers, or after
    /// `closeTimeout`.
    private func writeClose(_ code: WebSocketErrorCode, reason: String) {
        guard let context else { return }
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: code)
        data.writeString(reason)
        context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)), promise: nil)
        self.closeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.closeTimeout) {
            context.close(promise: nil)
        }
    }

    /// 1001 when the server goes away; 1008 ("policy violation") when the client must change
    /// something first (keep up, or bring a valid credential).
    static func closeCode(for reason: EventHub.CloseReason) -> WebSocketErrorCode {
        switch reason {
        case .shuttingDown, .historyChanged: .goingAway
        case .tooSlow, .credentialEnded: .policyViolation
        }
    }
}
