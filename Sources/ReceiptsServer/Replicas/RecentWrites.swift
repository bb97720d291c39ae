import NIOConcurrencyHelpers
import Postgres

/// Each user's newest write through this instance in the last `window` (at least; at most
/// twice it), so that a read about that user without a consistency token still shows it
/// (DESIGN, "Read replicas": the instance-local window for a user's own writes).
///
/// Bounded: two generations of at most `capacity` users each; the older one is dropped when
/// the newer one is `window` old, or full. A user dropped early (more than `capacity` users
/// writing within one window) only loses this courtesy: a token still binds.
final class RecentWrites: Sendable {
    private struct Key: Hashable {
        var tenant: String
        var user: String
    }

    private struct State {
        var current: [Key: WALPosition] = [:]
        var previous: [Key: WALPosition] = [:]
        var currentSince: ContinuousClock.Instant
    }

    private let window: Duration
    private let capacity: Int
    private let state: NIOLockedValueBox<State>

    init(window: Duration, capacity: Int = 100_000) {
        self.window = window
        self.capacity = capacity
        self.state = NIOLockedValueBox(State(currentSince: .now))
    }

    /// Records that `users` of `tenant` wrote, committed at `position`.
    func record(_ position: WALPosition, tenant: String, users: some Sequence<String>) {
        let now = ContinuousClock.now
        self.state.withLockedValue { state in
            for user in users {
                self.rotate(&state, now: now)
                let key = Key(tenant: tenant, user: user)
                state.current[key] = max(position, state.current[key] ?? position)
            }
        }
    }

    /// The newest position `user` of `tenant` wrote at within the window, if any.
    func position(tenant: String, user: String) -> WALPosition? {
        let now = ContinuousClock.now
        return self.state.withLockedValue { state in
            self.rotate(&state, now: now)
            let key = Key(tenant: tenant, user: user)
            switch (state.current[key], state.previous[key]) {
            case (let newer?, let older?): return max(newer, older)
            case (let one?, nil), (nil, let one?): return one
            case (nil, nil): return nil
            }
        }
    }

    private func rotate(_ state: inout State, now: ContinuousClock.Instant) {
        if now - state.currentSince >= self.window * 2 {
            state.previous = [:]
            state.current = [:]
            state.currentSince = now
        } else if now - state.currentSince >= self.window || state.current.count >= self.capacity {
            state.previous = state.current
            state.current = [:]
            state.currentSince = now
        }
    }
}
