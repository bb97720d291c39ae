import NIOConcurrencyHelpers

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

/// Each subscriber's `SubscriberWake` by its key: the fan-out names whom to wake
/// (`EventFanOut.Wake`), and the hub performs it here, outside the fan-out's lock. A wake-up
/// is registered before its subscriber joins the fan-out and removed after it left, so every
/// `Wake` the fan-out returns for a subscriber that is still there finds its wake-up.
final class SubscriberWakeUps: Sendable {
    private let wakeUps = NIOLockedValueBox<[EventFanOut.Key: SubscriberWake]>([:])

    func register(_ wake: SubscriberWake, for key: EventFanOut.Key) {
        self.wakeUps.withLockedValue { $0[key] = wake }
    }

    func remove(_ key: EventFanOut.Key) {
        self.wakeUps.withLockedValue { $0[key] = nil }
    }

    /// Wakes subscribers to pull, or ends their wake-ups (closed), in the order given.
    func perform(_ wakes: [EventFanOut.Wake]) {
        guard !wakes.isEmpty else { return }
        let found = self.wakeUps.withLockedValue { wakeUps in
            wakes.compactMap { wake -> (SubscriberWake, closes: Bool)? in
                switch wake {
                case .pull(let key): wakeUps[key].map { ($0, false) }
                case .close(let key): wakeUps[key].map { ($0, true) }
                }
            }
        }
        for (wakeUp, closes) in found {
            if closes { wakeUp.finish() } else { wakeUp.yield() }
        }
    }
}
