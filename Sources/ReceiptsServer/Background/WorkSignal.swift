import Synchronization

/// Wakes a background worker of this process when a request has just given it work (the
/// worker also looks on its own every so often, for work other instances gave).
///
/// Signals coalesce: a worker that is busy when several arrive runs once more, not once each.
/// One waiter at a time (the worker).
final class WorkSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    init() {}

    /// There is work: the worker runs soon.
    func signal() {
        self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }?.resume()
    }

    /// Returns after the next signal, after `timeout`, or when the task is cancelled, whichever
    /// comes first (at once when a signal came since the last wait).
    func wait(atMost timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            // A timer that fires before the wait below begins leaves a signal: the wait then
            // returns at once, as it should.
            group.addTask {
                try? await Task.sleep(for: timeout)
                self.signal()
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = self.state.withLock { state -> Bool in
                    if state.pending {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
            group.cancelAll()
        }
        // The timer's signal, when it fired after another one woke the wait, is not news.
        self.state.withLock { $0.pending = false }
    }
}
