import NIOConcurrencyHelpers
import ServiceLifecycle

/// Counts the streams held by NIO handlers (`HeldStream`) that have not yet begun to write
/// their end, and on graceful shutdown waits (at most `closeWait`) until every one has: their
/// connections have no task, so the server does not wait for them.
///
/// Listed before the hub among the services, so that it waits after the hub closed every
/// subscription (services shut down in the reverse of their order). By then the server's
/// quiescing has asked each stream to end (a WebSocket with 1001), and what this waits for is
/// those ends being written, not the clients' answers.
package final class OpenStreams: Service, Sendable {
    static let closeWait = Duration.seconds(5)

    private let count = NIOLockedValueBox(0)

    package init() {}

    /// The streams that have not begun their end yet.
    var open: Int { self.count.withLockedValue { $0 } }

    func opened() {
        self.count.withLockedValue { $0 += 1 }
    }

    /// The stream began its end, or its connection closed first.
    func closed() {
        self.count.withLockedValue { $0 -= 1 }
    }

    package func run() async {
        try? await gracefulShutdown()
        let deadline = ContinuousClock.now + Self.closeWait
        while self.open > 0, ContinuousClock.now < deadline, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
