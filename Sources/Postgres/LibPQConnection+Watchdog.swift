internal import CLibPQ
import NIOConcurrencyHelpers
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The connection as the pool's watchdog sees it (`PostgresConnectionPool.endUnresponsiveCalls`):
/// the calls mark when they wait for the server (`LibPQConnection+Readiness.swift`); the watchdog
/// reads how long the one now running has waited, from its own thread, and may end a call
/// that waits for a server that no longer answers.
extension LibPQConnection {
    /// Marks the calls that wait for the server, for `blockedFor`.
    @inline(__always)
    func markBlocked() { self.blockedSince.store(max(1, NIODeadline.now().uptimeNanoseconds), ordering: .relaxed) }
    @inline(__always)
    func markUnblocked() { self.blockedSince.store(0, ordering: .relaxed) }

    /// How long the call now waiting for the server has waited; nil when none is.
    var blockedFor: Duration? {
        let since = self.blockedSince.load(ordering: .relaxed)
        guard since != 0 else { return nil }
        return .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds) - Int64(since))
    }

    /// Ends the connection under a call that waits for a server that does not answer, even
    /// to a cancel request (frozen, or stalled on its storage): shuts its socket down, so the
    /// blocked call fails at once with a lost connection, and the pool discards it. Safe
    /// from any thread; does nothing once the connection is closed (its descriptor may then
    /// belong to another file).
    func abandon() {
        self.cancellation.withLockedValue { state in
            guard !state.isClosed else { return }
            state.isRequested = true
            _ = shutdown(PQsocket(self.handle), Int32(SHUT_RDWR))
        }
    }
}
