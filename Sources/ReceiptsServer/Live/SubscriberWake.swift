/// How the hub tells a subscriber to pull: `yield` when there may be something new, `finish`
/// when it was closed (its next pull throws the reason). Called outside the hub's lock, or
/// under it only to hand the wake-up on (neither may call back into the hub synchronously).
///
/// A stream with a task of its own waits on an `AsyncStream` (`init(_:)`); a WebSocket that
/// NIO handlers hold, with no task while it is live, starts one when woken
/// (`WebSocketStreamHandler`).
struct SubscriberWake: Sendable {
    let yield: @Sendable () -> Void
    let finish: @Sendable () -> Void

    init(yield: @escaping @Sendable () -> Void, finish: @escaping @Sendable () -> Void) {
        self.yield = yield
        self.finish = finish
    }

    /// Wakes the task that waits on the stream of `continuation`.
    init(_ continuation: AsyncStream<Void>.Continuation) {
        self.yield = { continuation.yield() }
        self.finish = { continuation.finish() }
    }
}
