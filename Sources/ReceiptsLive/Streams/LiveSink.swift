import NIOCore
import NIOHTTPTypes
import Synchronization

/// A stream's socket, which the hub writes a live subscriber's events to directly.
///
/// While a subscriber is at the newest event with nothing pending (`EventFanOut.goLive`), the
/// hub does not wake its stream for each event: it hands the event's frame, encoded once for
/// every stream, to the event loops of the subscribers' sockets, one hop a loop
/// (`LiveDeliveries`), and each loop writes it to its sockets there, tenant by tenant in turns
/// (`LiveWriteQueue`). A socket that cannot take more (its outbound buffer is above NIO's
/// high-water mark) is not written to: the subscriber leaves live delivery at the event before
/// (`EventHub.fellBehind`), and its stream pulls what follows at the client's pace, as a
/// stream that is behind always does.
package final class LiveSink: Sendable {
    /// How an event is put on the socket.
    package enum Framing: Sendable {
        /// One text frame, next to the socket (`install()`).
        case webSocket
        /// One `id:`/`data:` event as a body part of the response, through the pipeline (an
        /// SSE stream written by its request's task: HTTP/1.0 or 1.1).
        case serverSentEvents
        /// One `id:`/`data:` event as an HTTP/1.1 chunk, next to the socket (`install()`): an
        /// SSE stream held by NIO handlers, whose response is chunked (the server's `EventSourceHandler`).
        case serverSentEventChunks
    }

    /// What the socket's event loop keeps of the sink.
    private struct LoopState {
        /// The newest live period (`LiveRoute.period`) the loop has seen: writes of an earlier
        /// one are stale (the subscriber left it, and pulled what they carry).
        var period = 0
        /// The socket could not take an event of `period`: the rest of it is not written.
        var isStopped = false
        /// The stream is ending (`close()`): nothing more is written.
        var isClosed = false
        /// Written to since the loop's last flush.
        var isUnflushed = false
    }

    let channel: any Channel
    let framing: Framing
    /// The tenant whose stream this is (its writes wait in the tenant's line: `LiveWriteQueue`).
    package let tenant: String
    private let state: NIOLoopBoundBox<LoopState>
    /// A WebSocket's place next to the socket (`install()`).
    private let outlet: NIOLoopBoundBox<LiveFrameOutlet?>
    /// Writes handed to the loop's `LiveWriteQueue` (`handedOver(_:)`) and not yet written or
    /// dropped there.
    private let waitingWrites = Atomic<Int>(0)

    package init(channel: any Channel, framing: Framing, tenant: String) {
        self.channel = channel
        self.framing = framing
        self.tenant = tenant
        self.state = .makeBoxSendingValue(LoopState(), eventLoop: channel.eventLoop)
        self.outlet = .makeEmptyBox(eventLoop: channel.eventLoop)
    }

    /// Puts the sink's outlet first in the pipeline, next to the socket (for a WebSocket, or
    /// SSE chunks): the hub's frames are encoded once for every socket (`LiveFrame`), so they
    /// pass no handler. On the channel's event loop.
    package func install() throws {
        if case .serverSentEvents = self.framing { return }
        let outlet = LiveFrameOutlet()
        try self.channel.pipeline.syncOperations.addHandler(outlet, position: .first)
        self.outlet.value = outlet
    }

    /// Stops the hub's writes before the stream writes its end: those already handed to the
    /// event loop are written first, any later one is dropped (the client resumes after its
    /// last id). On the channel's event loop.
    func close() {
        if self.hasWaitingWrites { LiveWriteQueue.on(self.channel.eventLoop).writeAll(of: self.tenant) }
        self.state.value.isClosed = true
    }

    /// Whether writes handed to the event loop for this sink wait there (`LiveWriteQueue`).
    /// A stream that left live delivery checks it before it sends anything itself.
    var hasWaitingWrites: Bool { self.waitingWrites.load(ordering: .relaxed) > 0 }

    /// Counts `count` writes handed to the event loop's `LiveWriteQueue`: before the hand-over,
    /// and before the stream can be woken to pull.
    func handedOver(_ count: Int) {
        self.waitingWrites.add(count, ordering: .relaxed)
    }

    /// Has the writes waiting on the event loop written, from any task: a stream that left
    /// live delivery, before it sends what it pulls (they are older).
    func writeWaiting() async {
        try? await self.channel.eventLoop.submit {
            if self.hasWaitingWrites { LiveWriteQueue.on(self.channel.eventLoop).writeAll(of: self.tenant) }
        }.get()
    }

    /// `close()` from any task: done once this returns.
    package func closeFromTask() async {
        try? await self.channel.eventLoop.submit { self.close() }.get()
    }

    /// The comment an idle Server-Sent Events stream is sent.
    static let heartbeat = ": heartbeat\n\n"

    /// Writes a Server-Sent Events comment every `interval` until `close()`, from the event
    /// loop's `SecondTimerWheel` (the streams due within the same second share one wake-up of
    /// the loop): proxies see traffic on a quiet stream, and no task of the stream's own sleeps
    /// for it.
    package func startHeartbeats(every interval: TimeAmount) {
        if case .webSocket = self.framing { return }
        self.channel.eventLoop.execute { self.scheduleHeartbeat(in: interval) }
    }

    private func scheduleHeartbeat(in interval: TimeAmount) {
        guard !self.state.value.isClosed else { return }
        SecondTimerWheel.on(self.channel.eventLoop).schedule(in: interval) {
            guard !self.state.value.isClosed, self.channel.isActive else { return }
            switch self.framing {
            case .webSocket:
                return
            case .serverSentEvents:
                self.channel.writeAndFlush(HTTPResponsePart.body(ByteBuffer(string: Self.heartbeat)), promise: nil)
            case .serverSentEventChunks:
                guard let context = self.outlet.value?.context else { return }
                context.writeAndFlush(NIOAny(LiveFrame.chunk(Self.heartbeat, allocator: self.channel.allocator)), promise: nil)
            }
            self.scheduleHeartbeat(in: interval)
        }
    }

    /// What `write` did.
    enum WriteOutcome {
        /// Written; `isFirstSinceFlush`: the sink is to be flushed after this batch.
        case written(isFirstSinceFlush: Bool)
        /// Not written: of a live period that ended, after `close()`, or to a closed socket.
        case dropped
        /// Not written: the socket cannot take more (nothing more of this period is written).
        case full
    }

    /// Writes `frame` (not flushed), one of the writes handed over (`handedOver(_:)`), on the
    /// channel's event loop, unless it is of a live period that ended.
    func write(_ frame: LiveFrame, period: Int) -> WriteOutcome {
        self.waitingWrites.subtract(1, ordering: .relaxed)
        if period > self.state.value.period {
            self.state.value.period = period
            self.state.value.isStopped = false
        }
        guard period == self.state.value.period, !self.state.value.isStopped, !self.state.value.isClosed, self.channel.isActive
        else { return .dropped }
        guard self.channel.isWritable else {
            self.state.value.isStopped = true
            return .full
        }
        switch self.framing {
        case .webSocket:
            guard let context = self.outlet.value?.context else { return .dropped }
            context.write(NIOAny(frame.webSocket), promise: nil)
        case .serverSentEvents:
            self.channel.write(HTTPResponsePart.body(frame.serverSentEvent), promise: nil)
        case .serverSentEventChunks:
            guard let context = self.outlet.value?.context else { return .dropped }
            context.write(NIOAny(frame.serverSentEventChunk), promise: nil)
        }
        defer { self.state.value.isUnflushed = true }
        return .written(isFirstSinceFlush: !self.state.value.isUnflushed)
    }

    /// Flushes what `write` left unflushed: on the channel's event loop.
    func flush() {
        self.state.value.isUnflushed = false
        switch self.framing {
        case .webSocket, .serverSentEventChunks: self.outlet.value?.context?.flush()
        case .serverSentEvents: self.channel.flush()
        }
    }
}

/// An outbound handler that passes everything on (NIO's default): its context lets a
/// `LiveSink` write encoded WebSocket frames right before the socket.
private final class LiveFrameOutlet: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private(set) var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }
}

/// One event as live sinks write it: its bytes made once for every socket.
struct LiveFrame: Sendable {
    /// The JSON object as a server's WebSocket text frame (RFC 6455, 5.2: final, unmasked).
    let webSocket: ByteBuffer
    /// `id: <id>\ndata: <json>\n\n`.
    let serverSentEvent: ByteBuffer
    /// The same as an HTTP/1.1 chunk (RFC 9112, 7.1): its length in hex, CRLF, the event, CRLF.
    let serverSentEventChunk: ByteBuffer

    init(_ event: LiveEvent) {
        let length = event.json.utf8.count
        var frame = ByteBuffer()
        frame.reserveCapacity(length + 10)
        frame.writeInteger(UInt8(0x81))  // FIN, text
        switch length {
        case ..<126:
            frame.writeInteger(UInt8(length))
        case ...Int(UInt16.max):
            frame.writeInteger(UInt8(126))
            frame.writeInteger(UInt16(length))
        default:
            frame.writeInteger(UInt8(127))
            frame.writeInteger(UInt64(length))
        }
        frame.writeString(event.json)
        self.webSocket = frame
        let serverSentEvent = ServerSentEventText.event(id: event.eventId, json: event.json)
        self.serverSentEvent = ByteBuffer(string: serverSentEvent)
        self.serverSentEventChunk = Self.chunk(serverSentEvent, allocator: ByteBufferAllocator())
    }

    /// `text` as an HTTP/1.1 chunk.
    static func chunk(_ text: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        let length = String(text.utf8.count, radix: 16)
        var chunk = allocator.buffer(capacity: length.utf8.count + text.utf8.count + 4)
        chunk.writeString(length)
        chunk.writeString("\r\n")
        chunk.writeString(text)
        chunk.writeString("\r\n")
        return chunk
    }
}

/// A live subscriber's place in the fan-out: its sink, and the live period it is in (a
/// subscriber goes live again after it caught up, in a new period).
struct LiveRoute: Sendable {
    let sink: LiveSink
    let period: Int
    /// See `EventHub.Subscriber.committedBefore`.
    let committedBefore: EventHub.CommittedBefore?
}

/// The writes one look at the log makes to live sinks, gathered under the hub's lock and
/// handed to each event loop in one hop after it.
struct LiveDeliveries {
    /// One write: an event (by its index in `frames`) to a live subscriber, which is at
    /// `previous` before it.
    struct Delivery {
        let route: LiveRoute
        let subscriber: EventFanOut.Key
        let frame: Int
        let previous: Int64
    }

    /// Most writes one look at the log gathers, with those still waiting on the event loops
    /// (about 100 bytes each while they wait): a page of events to a great many live streams
    /// would otherwise take as much memory as events times streams. The subscribers an event
    /// would take past it pull instead (`Feed.append`).
    static let defaultLimit = 1 << 18

    let limit: Int
    private(set) var events: [LiveEvent] = []
    private var byLoop: [ObjectIdentifier: (loop: any EventLoop, deliveries: [Delivery])] = [:]
    private(set) var count = 0

    /// `limit`: the most writes; by default what `defaultLimit` leaves beside the writes still
    /// waiting on the event loops (`LiveWriteQueue.waitingEverywhere`).
    init(limit: Int = max(0, LiveDeliveries.defaultLimit - LiveWriteQueue.waitingEverywhere.load(ordering: .relaxed))) {
        self.limit = limit
    }

    var isEmpty: Bool { self.byLoop.isEmpty }

    /// Whether `writes` more fit under `limit`.
    func hasRoom(for writes: Int) -> Bool { self.count + writes <= self.limit }

    /// Each write, as which subscriber gets which event id (in order for each subscriber).
    var writes: [(subscriber: EventFanOut.Key, eventId: Int64)] {
        self.byLoop.values.flatMap { $0.deliveries.map { ($0.subscriber, self.events[$0.frame].id) } }
    }

    /// Adds `event` for `routes`, whose subscribers are all at `previous` before it.
    mutating func add(_ event: LiveEvent, after previous: Int64, to routes: some Sequence<(key: Int, value: LiveRoute)>, tenant: String) {
        var index: Int?
        for (id, route) in routes where !(route.committedBefore?.excludes(event) ?? false) {
            if index == nil {
                index = self.events.count
                self.events.append(event)
            }
            let loop = route.sink.channel.eventLoop
            let delivery = Delivery(route: route, subscriber: EventFanOut.Key(tenant: tenant, id: id), frame: index!, previous: previous)
            self.byLoop[ObjectIdentifier(loop), default: (loop, [])].deliveries.append(delivery)
            self.count += 1
        }
    }

    /// Encodes each event's frame once and hands every event loop its deliveries, in order,
    /// to write tenant by tenant in turns, taking at most `loopShare` percent of the loop's time
    /// while more wait (`LiveWriteQueue`); `fellBehind` is called (on that loop) for each
    /// subscriber whose socket could not take one, with the live period and the position
    /// before that event.
    func send(loopShare: Int = 100, fellBehind: @escaping @Sendable (EventFanOut.Key, _ period: Int, _ position: Int64) -> Void) {
        guard !self.isEmpty else { return }
        LiveWriteQueue.waitingEverywhere.add(self.count, ordering: .relaxed)
        for (loop, deliveries) in self.byLoop.values {
            // Bytes of each loop's own: one buffer written by the sockets of two threads is
            // retained and released by both for every write, and its reference count's cache
            // line goes back and forth between the cores (a profile of 10,000 streams showed it).
            let frames = LiveFrames(self.events.map(LiveFrame.init))
            for delivery in deliveries { delivery.route.sink.handedOver(1) }
            let writes = deliveries.map { LiveWriteQueue.Write(delivery: $0, frames: frames, fellBehind: fellBehind) }
            loop.execute { LiveWriteQueue.on(loop).enqueue(writes, loopShare: loopShare) }
        }
    }
}
