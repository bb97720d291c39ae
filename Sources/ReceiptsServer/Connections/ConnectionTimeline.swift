import NIOCore

/// The deadlines of one HTTP/1 connection (README, "Limits, timeouts and faults"), as a
/// pure state machine: `HTTPConnectionGuard` feeds it what the connection does and acts on
/// what it answers, so the rules are tested without sockets.
///
/// - A request head must be complete within `headTimeout` of its first byte (of the
///   connection's start, for the first request): a half-sent head cannot hold a connection.
/// - Between requests a keep-alive connection may stay idle for `idleTimeout`; a request
///   body that stops arriving for that long is given up too.
/// - While the service is answering (the request read, the response not finished) nothing
///   is timed: streams answer for as long as they run.
/// - A response may end before its request was read (an early 401 or 413: bodies are read
///   only behind authentication). The rest of the request is then read and dropped for at
///   most `drainTimeout` and `drainBytes`, so that closing does not reset the connection
///   under the client's answer. When at most `keepAliveDrainBytes` of a declared body were
///   left (Go's `net/http` draws the same line) the connection then stays open; otherwise
///   the response announces `Connection: close` and the connection closes.
struct ConnectionTimeline {
    struct Limits: Sendable {
        var headTimeout: TimeAmount
        var idleTimeout: TimeAmount
        var drainTimeout: TimeAmount = .seconds(2)
        /// Enough for a client to finish sending a body at the 1 MiB limit.
        var drainBytes: Int = 2 * 1024 * 1024
        var keepAliveDrainBytes: Int = 256 * 1024
    }

    /// What the connection must do after an event.
    enum Action: Equatable {
        case none
        case close
    }

    let limits: Limits
    /// Requests whose head arrived and whose response has not ended (more than one only
    /// when a client pipelines).
    private(set) var openRequests = 0
    /// Whether a request head arrived and its end has not.
    private(set) var isReadingRequest = false
    /// Whether the connection closes once its open requests are answered (a quiescing
    /// server, a response announcing `Connection: close`).
    private(set) var closesAfterResponse = false
    /// The last request part received, or the end of the last response.
    private var lastActivity: NIODeadline
    /// When the first byte of a request head arrived, while it is not complete.
    private var headStarted: NIODeadline?
    /// The body still to come of the request being read, when its head declared a length.
    private var bodyBytesLeft: Int?
    /// Set while the rest of a request answered early is read and dropped.
    private var draining: (until: NIODeadline, bytesLeft: Int)?

    /// A new connection: its first request head is timed from now.
    init(limits: Limits, now: NIODeadline) {
        self.limits = limits
        self.lastActivity = now
        self.headStarted = now
    }

    /// When the connection is closed unless something happens first; nil while the service
    /// is answering.
    var deadline: NIODeadline? {
        if let draining { return draining.until }
        if self.isReadingRequest { return self.lastActivity + self.limits.idleTimeout }
        if self.openRequests > 0 { return nil }
        if let headStarted { return headStarted + self.limits.headTimeout }
        return self.lastActivity + self.limits.idleTimeout
    }

    /// Bytes arrived from the client (before they are decoded).
    mutating func received(bytes: Int, now: NIODeadline) -> Action {
        if var draining {
            draining.bytesLeft -= bytes
            self.draining = draining
            return draining.bytesLeft < 0 ? .close : .none
        }
        if !self.isReadingRequest, self.headStarted == nil {
            self.headStarted = now
        }
        return .none
    }

    /// A request head was decoded. `keepsAlive` is false when it asks to close the
    /// connection after its answer (`Connection: close`, or HTTP/1.0 without keep-alive);
    /// `bodyLength` is its declared `Content-Length` (nil when chunked).
    mutating func receivedHead(now: NIODeadline, keepsAlive: Bool = true, bodyLength: Int? = 0) {
        if !keepsAlive { self.closesAfterResponse = true }
        self.openRequests += 1
        self.isReadingRequest = true
        self.bodyBytesLeft = bodyLength
        self.headStarted = nil
        self.lastActivity = now
    }

    /// A part of a request body was decoded.
    mutating func receivedBody(bytes: Int, now: NIODeadline) {
        self.bodyBytesLeft = self.bodyBytesLeft.map { $0 - bytes }
        self.lastActivity = now
    }

    /// A request's end was decoded.
    mutating func receivedEnd(now: NIODeadline) -> Action {
        self.isReadingRequest = false
        self.lastActivity = now
        // Bytes that arrive from here on start the next head.
        self.headStarted = nil
        guard self.draining != nil else { return .none }
        self.draining = nil
        return self.closesAfterResponse && self.openRequests == 0 ? .close : .none
    }

    /// A response head is being sent; answers whether it must announce `Connection: close`
    /// (asked for, a quiescing server, or too much of its request left unread).
    mutating func sendingResponseHead(announcesClose: Bool) -> Bool {
        if announcesClose { self.closesAfterResponse = true }
        if self.isReadingRequest, (self.bodyBytesLeft ?? .max) > self.limits.keepAliveDrainBytes {
            self.closesAfterResponse = true
        }
        return self.closesAfterResponse
    }

    /// A response ended.
    mutating func sentResponseEnd(now: NIODeadline) -> Action {
        self.openRequests = max(0, self.openRequests - 1)
        self.lastActivity = now
        guard self.openRequests == 0 else { return .none }
        if self.isReadingRequest {
            self.draining = (now + self.limits.drainTimeout, self.limits.drainBytes)
            return .none
        }
        return self.closesAfterResponse ? .close : .none
    }

    /// The server is shutting down: idle and half-sent connections close now, the others
    /// after their response.
    mutating func quiesce() -> Action {
        self.closesAfterResponse = true
        return self.openRequests == 0 ? .close : .none
    }

    /// The timer armed for `deadline` fired.
    func timerFired(now: NIODeadline) -> Action {
        guard let deadline else { return .none }
        return now >= deadline ? .close : .none
    }
}
