import Logging
import NIOCore
import NIOWebSocket

/// An event stream's WebSocket after the handshake, held by NIO handlers alone: no task, no
/// async stream, nothing per socket but this handler's state, while the stream is live.
///
/// - **Events.** The hub wakes the stream (`SubscriberWake`) when it has something to pull; a
///   task then pulls at the client's pace (each batch is written and flushed before the next
///   is pulled), and ends once the stream is up to date and the hub writes what follows
///   itself (`EventHub.goLive`, `LiveSink`). A stream that resumes, falls behind, or is woken
///   for a new history gets such a task again; a live one has none.
/// - **The client's messages.** Delivery acknowledgements are recorded one at a time, in
///   order, by a task of their own; the socket is not read meanwhile (TCP holds the client
///   back). Pings are answered with pongs; a close is answered with a close, and the
///   connection closes.
/// - **Closes.** When the hub closes the subscription (shutdown, too slow, credential ended, a
///   lost history), the stream stops the hub's writes (`LiveSink.close()`), sends a close
///   frame with the code and reason (`WebSocketStream.closeCode(for:)`), and waits up to
///   `closeTimeout` for the client's before it closes the connection. A server that begins a
///   graceful shutdown tells each connection (`ChannelShouldQuiesceEvent`): the stream closes
///   with 1001 and the reason. However the connection ends, the subscription, the credential
///   watch and the place under the stream caps are given back once, when it closes.
final class WebSocketStreamHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// How long the client has to answer the server's close frame.
    static let closeTimeout = TimeAmount.seconds(5)

    private enum Phase {
        case open
        /// The server or the client sent a close frame: nothing more is sent.
        case closing
        /// The connection closed; everything is given back.
        case closed
    }

    /// What a pull task ended with.
    private enum Pulled: Sendable {
        /// Up to date, and live if the hub took it.
        case upToDate
        case closed(EventHub.CloseReason)
        /// The log could not be read, or the socket closed under it.
        case failed(String)
    }

    private let stream: WebSocketStream
    private let opening: OpeningStream
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var sink: LiveSink?
    private var subscription: EventSubscription?
    private var watch: StreamCredentialWatch.Watch?
    private var phase = Phase.open
    /// A task pulls events; `isWokenWhilePulling`: the hub woke the stream meanwhile, so it
    /// pulls again once that task is done.
    private var isPulling = false
    private var isWokenWhilePulling = false
    /// The `resync.required` to send before anything else (`EventHub.Start.resync`).
    private var pendingResync: EventHub.Resync?
    /// Text messages not yet taken up, and whether a task records one now. Bounded by what
    /// the reads before the socket stopped being read carried (a few reads of at most 64 KiB).
    private var acknowledgements: [String] = []
    private var isAcknowledging = false
    private var closeTimer: Scheduled<Void>?
    /// Counted among the `OpenWebSockets` (until it sent its close frame, or closed).
    private var isCounted = false

    init(stream: WebSocketStream, opening: OpeningStream, logger: Logger) {
        self.stream = stream
        self.opening = opening
        self.logger = logger
        self.pendingResync = opening.start.resync
    }

    /// Puts the stream's handlers after the frame codec that the upgrade added: pings
    /// (`WebSocketKeepAlive`), messages of several frames joined up to
    /// `WebSocketStream.maximumMessageSize`, then this handler. On the channel's event loop.
    static func install(on channel: any Channel, stream: WebSocketStream, opening: OpeningStream, logger: Logger) throws {
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(WebSocketKeepAlive())
        try pipeline.addHandler(
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 256, maxAccumulatedFrameSize: WebSocketStream.maximumMessageSize))
        try pipeline.addHandler(WebSocketStreamHandler(stream: stream, opening: opening, logger: logger))
    }

    // MARK: - The connection

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // Added by the upgrade, on an open connection.
        guard context.channel.isActive else {
            self.giveBack()
            return
        }
        let sink = LiveSink(channel: context.channel, framing: .webSocket)
        do {
            try sink.install()
        } catch {
            self.giveBack()
            context.close(promise: nil)
            return
        }
        self.sink = sink
        self.stream.guards.openWebSockets.opened()
        self.isCounted = true
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        let wake = SubscriberWake(
            yield: { loop.execute { handler.value.woken() } },
            finish: { loop.execute { handler.value.woken() } })
        let hub = self.stream.hub
        let subscription = hub.subscribe(self.opening.principal, from: self.opening.start, wake: wake)
        self.subscription = subscription
        self.watch = self.stream.guards.credentials.watch(self.opening.credential) { hub.close(subscription, .credentialEnded) }
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
            // The server shuts down: the hub closes the subscription, and the stream says so.
            if let subscription { self.stream.hub.close(subscription, .shuttingDown) }
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
            self.close(.messageTooLarge, reason: "a message may take at most 1 MiB")
        case is NIOWebSocketFrameAggregator.Error:
            self.close(.protocolError, reason: "malformed fragmented message")
        default:
            // An I/O error: the connection is of no more use.
            context.close(promise: nil)
        }
    }

    // MARK: - The client's frames

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        switch frame.opcode {
        case .connectionClose:
            self.answerClose(frame, context: context)
        case .ping where self.phase == .open:
            context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .text where self.phase == .open && self.opening.principal.tokenUser != nil:
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
        guard self.phase == .open else {
            context.close(promise: nil)
            return
        }
        self.stopSending()
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
        guard !self.isAcknowledging, self.phase == .open, let context, !self.acknowledgements.isEmpty else { return }
        let text = self.acknowledgements.removeFirst()
        self.isAcknowledging = true
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let stream = self.stream
        let principal = self.opening.principal
        let logger = self.logger
        let loop = context.eventLoop
        Task {
            let failure = await stream.acknowledgeDelivery(text, principal: principal, logger: logger)
            loop.execute { handler.value.acknowledged(failure: failure) }
        }
    }

    private func acknowledged(failure: String?) {
        self.isAcknowledging = false
        guard self.phase == .open, let context else { return }
        if let failure {
            context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: failure))), promise: nil)
        }
        if self.acknowledgements.isEmpty {
            context.channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in }
        } else {
            self.acknowledgeNext()
        }
    }

    // MARK: - Events

    /// The hub has something for the stream (or closed it): pull, unless a pull runs.
    private func woken() {
        guard self.phase == .open else { return }
        if self.isPulling {
            self.isWokenWhilePulling = true
        } else {
            self.startPulling()
        }
    }

    private func startPulling() {
        guard let context, let sink, let subscription else { return }
        self.isPulling = true
        self.isWokenWhilePulling = false
        let resync = self.pendingResync
        self.pendingResync = nil
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let hub = self.stream.hub
        let loop = context.eventLoop
        let write: @Sendable ([String]) async throws -> Void = { texts in
            try await loop.flatSubmit { handler.value.write(texts) ?? loop.makeFailedFuture(ChannelError.ioOnClosedChannel) }.get()
        }
        Task {
            let pulled = await WebSocketStreamHandler.pull(subscription, from: hub, resync: resync, goingLiveTo: sink, write: write)
            loop.execute { handler.value.finishedPulling(pulled) }
        }
    }

    /// Pulls until the subscription is up to date, writing each batch (`write` returns once
    /// the socket took it), then hands it to live delivery.
    private static func pull(
        _ subscription: EventSubscription, from hub: EventHub, resync: EventHub.Resync?, goingLiveTo sink: LiveSink,
        write: @Sendable ([String]) async throws -> Void
    ) async -> Pulled {
        do {
            if let resync { try await write([resync.json]) }
            while true {
                let batch = try await hub.nextEvents(for: subscription)
                let texts = (batch.resync.map { [$0.json] } ?? []) + batch.events.map(\.json)
                if !texts.isEmpty { try await write(texts) }
                if batch.isUpToDate { break }
            }
            hub.goLive(subscription, sink: sink)
            return .upToDate
        } catch let reason as EventHub.CloseReason {
            return .closed(reason)
        } catch {
            return .failed(String(reflecting: type(of: error)))
        }
    }

    /// Writes one text frame for each of `texts` and flushes: the future completes when the
    /// socket took them. Nil when the stream is closing.
    private func write(_ texts: [String]) -> EventLoopFuture<Void>? {
        guard self.phase == .open, let context, let last = texts.last else { return nil }
        for text in texts.dropLast() {
            context.write(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: text))), promise: nil)
        }
        return context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: last))))
    }

    private func finishedPulling(_ pulled: Pulled) {
        self.isPulling = false
        switch pulled {
        case .upToDate:
            if self.isWokenWhilePulling { self.woken() }
        case .closed(let reason):
            self.close(WebSocketStream.closeCode(for: reason), reason: reason.rawValue)
        case .failed(let error):
            guard self.phase == .open else { return }
            self.logger.warning("a WebSocket stream could not be sent its events", metadata: ["error": "\(error)"])
            self.close(.unexpectedServerError, reason: "the events could not be read; reconnect with the last id to resume")
        }
    }

    // MARK: - Closing

    /// Stops the hub's writes, sends a close frame, and closes the connection when the client
    /// answers, or after `closeTimeout`.
    private func close(_ code: WebSocketErrorCode, reason: String) {
        guard self.phase == .open, let context else { return }
        self.stopSending()
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: code)
        data.writeString(reason)
        context.writeAndFlush(self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)), promise: nil)
        self.closeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.closeTimeout) {
            context.close(promise: nil)
        }
    }

    /// Sends nothing more from here on: the hub's writes stop (those already handed to the
    /// event loop went first), and a close frame is the last frame.
    private func stopSending() {
        self.phase = .closing
        self.sink?.close()
        if self.isCounted {
            self.isCounted = false
            self.stream.guards.openWebSockets.closed()
        }
    }

    /// Gives back what the stream holds, once: its subscription, credential watch and place
    /// under the caps.
    private func giveBack() {
        guard self.phase != .closed else { return }
        self.stopSending()
        self.phase = .closed
        self.closeTimer?.cancel()
        self.closeTimer = nil
        if let subscription { self.stream.hub.unsubscribe(subscription) }
        if let watch { self.stream.guards.credentials.stop(watch) }
        self.subscription = nil
        self.watch = nil
        self.opening.permit.release()
    }
}
