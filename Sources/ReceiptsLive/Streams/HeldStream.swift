import Logging
import NIOCore

/// An event stream whose connection NIO handlers hold, with no task of its own while it is
/// live: a WebSocket (`WebSocketStreamHandler`), or a Server-Sent Events response that is its
/// connection's first request (the server's `EventSourceHandler`). It keeps the stream's subscription and
/// the rules every such stream follows; its handler frames what it sends.
///
/// - **Events.** The hub wakes the stream (`SubscriberWake`) when it has something to pull; a
///   task then pulls at the client's pace (each batch is written and flushed before the next
///   is pulled: `Output.send`), and ends once the stream is up to date and the hub writes what
///   follows itself (`EventHub.goLive`, `LiveSink`). A stream that resumes, falls behind, or is
///   woken for a new history gets such a task again; a live one has none.
/// - **The end.** When the hub closes the subscription (shutdown, too slow, credential ended,
///   a lost history) or its events cannot be read, the hub's writes stop (`LiveSink.close()`)
///   before the handler writes the stream's end (`Output.end`), so nothing follows it; the
///   connection closes within `endDeadline` of the hub's close, whatever the client does.
/// - **Given back once**, when the connection closes: the subscription, the credential watch
///   and the place under the stream caps.
///
/// Used on the channel's event loop only.
package final class HeldStream {
    /// How the stream's handler puts events and the end on its connection.
    package struct Output {
        /// Writes events (`id`, `json`) and flushes; the future completes once the socket took
        /// them. Nil when the stream is ending.
        package let send: ([(id: String, json: String)]) -> EventLoopFuture<Void>?
        /// Writes the stream's end: why the hub closed it, or nil when its events could not be
        /// read. Called once, after the hub's writes stopped.
        package let end: (EventHub.CloseReason?) -> Void

        package init(send: @escaping ([(id: String, json: String)]) -> EventLoopFuture<Void>?, end: @escaping (EventHub.CloseReason?) -> Void) {
            self.send = send
            self.end = end
        }
    }

    /// What a pull task ended with.
    private enum Pulled: Sendable {
        /// Up to date, and live if the hub took it.
        case upToDate
        case closed(EventHub.CloseReason)
        /// The log could not be read, or the socket closed under it.
        case failed(String)
    }

    private enum Phase {
        case open
        /// The end was written (or the client ended the stream): nothing more is sent.
        case ending
        /// The connection closed; everything is given back.
        case closed
    }

    /// How long a stream the hub closed may take to end (`closedByHub()`).
    static let endDeadline = TimeAmount.seconds(5)

    private let streams: HeldStreams
    /// Counted under it among the `OpenStreams`.
    private let kind: OpenStreams.Kind
    private let opening: OpeningStream
    private let sink: LiveSink
    private let logger: Logger
    private var output: Output?
    private var subscription: EventSubscription?
    private var stopWatchingCredential: (@Sendable () -> Void)?
    private var phase = Phase.open
    /// A task pulls events; `isWokenWhilePulling`: the hub woke the stream meanwhile, so it
    /// pulls again once that task is done.
    private var isPulling = false
    private var isWokenWhilePulling = false
    /// The `resync.required` to send before anything else (`EventHub.Start.resync`).
    private var pendingResync: EventHub.Resync?
    /// Counted among the `OpenStreams` (until it began its end, or closed).
    private var isCounted = false

    package init(streams: HeldStreams, kind: OpenStreams.Kind, opening: OpeningStream, sink: LiveSink, logger: Logger, output: Output) {
        self.streams = streams
        self.kind = kind
        self.opening = opening
        self.sink = sink
        self.logger = logger
        self.output = output
        self.pendingResync = opening.start.resync
    }

    /// Whether the stream still sends.
    package var isOpen: Bool { self.phase == .open }

    /// Subscribes (the hub wakes the stream at once to pull), and watches the credential.
    package func start() {
        let loop = self.sink.channel.eventLoop
        self.streams.open.opened(self.kind)
        self.isCounted = true
        let stream = NIOLoopBound(self, eventLoop: loop)
        let wake = SubscriberWake(
            yield: { loop.execute { stream.value.woken() } },
            finish: { loop.execute { stream.value.closedByHub() } })
        let hub = self.streams.hub
        let subscription = hub.subscribe(self.opening.principal, from: self.opening.start, wake: wake)
        self.subscription = subscription
        self.stopWatchingCredential = self.opening.watchCredential { hub.close(subscription, .credentialEnded) }
    }

    /// The server shuts down: the hub closes the subscription, and the stream ends saying so.
    package func quiesce() {
        if let subscription { self.streams.hub.close(subscription, .shuttingDown) }
    }

    /// Sends nothing more from here on (the client ended the stream, or its end is being
    /// written): the hub's writes stop, those already handed to the event loop went first.
    package func stopSending() {
        guard self.phase == .open else { return }
        self.phase = .ending
        self.sink.close()
        if self.isCounted {
            self.isCounted = false
            self.streams.open.closed(self.kind)
        }
    }

    /// Gives back what the stream holds, once: its subscription, credential watch and place
    /// under the caps.
    package func giveBack() {
        guard self.phase != .closed else { return }
        self.stopSending()
        self.phase = .closed
        self.output = nil
        if let subscription { self.streams.hub.unsubscribe(subscription) }
        self.stopWatchingCredential?()
        self.subscription = nil
        self.stopWatchingCredential = nil
        self.opening.permit.release()
    }

    // MARK: - Pulling

    /// The hub closed the subscription: the next pull says why, and the handler writes the
    /// stream's end. The connection closes `endDeadline` later whatever the client does: one
    /// that reads nothing (its socket takes no more) holds neither a pull nor the end back.
    private func closedByHub() {
        guard self.phase == .open else { return }
        let channel = self.sink.channel
        channel.eventLoop.assumeIsolated().scheduleTask(in: Self.endDeadline) { channel.close(promise: nil) }
        self.woken()
    }

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
        guard let subscription else { return }
        self.isPulling = true
        self.isWokenWhilePulling = false
        let resync = self.pendingResync
        self.pendingResync = nil
        let loop = self.sink.channel.eventLoop
        let stream = NIOLoopBound(self, eventLoop: loop)
        let sink = self.sink
        let send: @Sendable ([(id: String, json: String)]) async throws -> Void = { events in
            try await loop.flatSubmit {
                stream.value.output?.send(events) ?? loop.makeFailedFuture(ChannelError.ioOnClosedChannel)
            }.get()
        }
        Task {
            let pulled = await HeldStream.pull(subscription, resync: resync, goingLiveTo: sink, send: send)
            loop.execute { stream.value.finishedPulling(pulled) }
        }
    }

    /// Catches the subscription up (`EventSubscription.catchUp`) and says how that ended.
    private static func pull(
        _ subscription: EventSubscription, resync: EventHub.Resync?, goingLiveTo sink: LiveSink,
        send: @Sendable ([(id: String, json: String)]) async throws -> Void
    ) async -> Pulled {
        do {
            try await subscription.catchUp(after: resync, goingLiveTo: sink, send)
            return .upToDate
        } catch let reason as EventHub.CloseReason {
            return .closed(reason)
        } catch {
            return .failed(String(reflecting: type(of: error)))
        }
    }

    private func finishedPulling(_ pulled: Pulled) {
        self.isPulling = false
        guard self.phase == .open else { return }
        switch pulled {
        case .upToDate:
            if self.isWokenWhilePulling { self.woken() }
        case .closed(let reason):
            self.end(reason)
        case .failed(let error):
            self.logger.warning("a stream could not be sent its events", metadata: ["error": "\(error)"])
            self.end(nil)
        }
    }

    private func end(_ reason: EventHub.CloseReason?) {
        let output = self.output
        self.stopSending()
        output?.end(reason)
    }
}
