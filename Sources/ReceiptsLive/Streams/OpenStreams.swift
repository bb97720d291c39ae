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

    /// How a stream reaches its client.
    package enum Kind: CaseIterable, Sendable {
        case webSocket
        case serverSentEvents

        /// The `kind` label of `receipts_streams_open`.
        package var label: String {
            switch self {
            case .webSocket: "websocket"
            case .serverSentEvents: "sse"
            }
        }
    }

    private let counts = NIOLockedValueBox((webSocket: 0, serverSentEvents: 0))

    package init() {}

    /// The streams that have not begun their end yet.
    var open: Int { self.counts.withLockedValue { $0.webSocket + $0.serverSentEvents } }

    /// The streams of `kind` that have not begun their end yet.
    package func open(_ kind: Kind) -> Int {
        self.counts.withLockedValue { kind == .webSocket ? $0.webSocket : $0.serverSentEvents }
    }

    func opened(_ kind: Kind) {
        self.add(1, to: kind)
    }

    /// The stream began its end, or its connection closed first.
    func closed(_ kind: Kind) {
        self.add(-1, to: kind)
    }

    private func add(_ change: Int, to kind: Kind) {
        self.counts.withLockedValue { counts in
            switch kind {
            case .webSocket: counts.webSocket += change
            case .serverSentEvents: counts.serverSentEvents += change
            }
        }
    }

    package func run() async {
        try? await gracefulShutdown()
        let deadline = ContinuousClock.now + Self.closeWait
        while self.open > 0, ContinuousClock.now < deadline, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
