import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Listens on PostgreSQL channels over a dedicated connection and hands each channel's
/// notifications to the subscriptions of that channel.
///
/// Each part of a program that needs notifications subscribes for itself
/// (`subscribe(to:)`), before the listener runs; the listener `LISTEN`s on every channel
/// subscribed to. The connection waits on socket readiness (`SocketPoller`), so
/// notifications arrive as soon as the server sends them. When the connection drops, the
/// listener reconnects with exponential backoff, listens again, and tells every subscription
/// `.listening(afterGap: true)`: notifications sent while it was away are lost, so a consumer
/// catches up from a table.
///
/// A subscription holds at most `bufferSize` notifications its consumer has not taken: past
/// that it drops them and reports `.missed` before the next one, which a consumer treats as
/// a gap too. So one slow consumer never holds up the others, nor grows without bound.
///
/// Run it as a `Service`; the subscriptions finish when `run()` returns.
public final class PostgresListener: Service, Sendable {
    /// What a subscription reports, in order.
    public enum Event: Sendable, Hashable {
        /// `LISTEN` is in effect on a new connection. `afterGap` is true when an earlier
        /// connection was lost, so notifications in between may have been missed.
        case listening(afterGap: Bool)
        /// A notification on the subscription's channel.
        case notification(PostgresNotification)
        /// The consumer fell `bufferSize` notifications behind and some were dropped, just
        /// before this: catch up as after a gap.
        case missed
    }

    /// Reconnection timing. The maximum is short: attempts against a server that is down
    /// cost little (a refused connection), and the service is ready again no later than one
    /// interval after the server is back (README, "Limits, timeouts and faults": within 5 s).
    public struct Backoff: Sendable {
        public var initial: Duration
        public var maximum: Duration

        public init(initial: Duration = .milliseconds(50), maximum: Duration = .seconds(1)) {
            self.initial = initial
            self.maximum = maximum
        }

        func delay(afterFailures failures: Int) -> Duration {
            let factor = 1 << min(failures, 16)
            return min(self.initial * factor, self.maximum)
        }
    }

    /// One consumer's channel and where its events go.
    private struct Subscription {
        let channel: String
        let continuation: AsyncStream<Event>.Continuation
        /// Events were dropped since the consumer last took one: `.missed` goes first.
        var hasMissed = false

        /// Hands `event` on, or drops it (and remembers so) when the consumer's buffer is full.
        mutating func deliver(_ event: Event) {
            if self.hasMissed {
                guard case .enqueued = self.continuation.yield(.missed) else { return }
                self.hasMissed = false
            }
            if case .dropped = self.continuation.yield(event) { self.hasMissed = true }
        }
    }

    private struct State {
        var backendPID: Int32?
        var subscriptions: [Int: Subscription] = [:]
        var nextSubscriptionId = 0
        /// Set once `run()` has begun: the channels are fixed then.
        var hasStarted = false

        var channels: Set<String> { Set(self.subscriptions.values.map(\.channel)) }
    }

    /// Notifications a subscription holds for its consumer before it drops them.
    public let bufferSize: Int
    private let configuration: PostgresConfiguration
    private let backoff: Backoff
    private let logger: Logger
    private let state = NIOLockedValueBox(State())

    public init(
        configuration: PostgresConfiguration,
        backoff: Backoff = Backoff(),
        bufferSize: Int = 1024,
        logger: Logger
    ) {
        precondition(bufferSize > 0, "a subscription must hold at least one notification")
        self.configuration = configuration
        self.backoff = backoff
        self.bufferSize = bufferSize
        self.logger = logger
    }

    /// The notifications of `channel`, and every `.listening(afterGap:)`, from now until the
    /// listener stops (or the consumer stops iterating). Subscribe before `run()`: the
    /// listener listens on the channels subscribed to when it starts.
    public func subscribe(to channel: String) -> AsyncStream<Event> {
        let (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingOldest(self.bufferSize))
        let id = self.state.withLockedValue { state -> Int? in
            precondition(!state.hasStarted, "PostgresListener: subscribe to \(channel) before run()")
            let id = state.nextSubscriptionId
            state.nextSubscriptionId += 1
            state.subscriptions[id] = Subscription(channel: channel, continuation: continuation)
            return id
        }
        continuation.onTermination = { [weak self] _ in
            guard let id else { return }
            self?.state.withLockedValue { _ = $0.subscriptions.removeValue(forKey: id) }
        }
        return events
    }

    /// Whether `LISTEN` is currently in effect (for readiness checks).
    public var isListening: Bool { self.state.withLockedValue { $0.backendPID != nil } }

    /// The server process of the current listening connection, if any.
    public var backendPID: Int32? { self.state.withLockedValue { $0.backendPID } }

    /// Listens until cancelled or gracefully shut down.
    public func run() async throws {
        let channels = self.state.withLockedValue { state -> [String] in
            state.hasStarted = true
            return state.channels.sorted()
        }
        defer {
            let subscriptions = self.state.withLockedValue { state in
                defer { state.subscriptions = [:] }
                return state.subscriptions.values
            }
            for subscription in subscriptions { subscription.continuation.finish() }
        }
        await cancelWhenGracefulShutdown {
            await self.listenUntilCancelled(on: channels)
        }
    }

    /// Hands `event` to the subscriptions of `channel` (all of them when nil).
    private func deliver(_ event: Event, channel: String?) {
        self.state.withLockedValue { state in
            for id in state.subscriptions.keys where channel == nil || state.subscriptions[id]!.channel == channel {
                state.subscriptions[id]!.deliver(event)
            }
        }
    }

    private func listenUntilCancelled(on channels: [String]) async {
        var failures = 0
        var hasListened = false
        while !Task.isCancelled {
            let connection: LibPQConnection
            do {
                connection = try await self.connectAndListen(on: channels)
            } catch {
                self.logger.warning(
                    "postgres listener could not connect; retrying",
                    metadata: ["error": "\(error)", "postgres.retry_in": "\(self.backoff.delay(afterFailures: failures))"]
                )
                try? await Task.sleep(for: self.backoff.delay(afterFailures: failures))
                failures += 1
                continue
            }
            failures = 0
            self.state.withLockedValue { $0.backendPID = connection.backendPID }
            self.logger.debug("postgres listener listening", metadata: ["postgres.channels": "\(channels)"])
            self.deliver(.listening(afterGap: hasListened), channel: nil)
            hasListened = true

            await self.relayNotifications(from: connection)

            self.state.withLockedValue { $0.backendPID = nil }
            connection.close()
            if !Task.isCancelled {
                self.logger.warning("postgres listener lost its connection; reconnecting")
            }
        }
    }

    private func connectAndListen(on channels: [String]) async throws -> LibPQConnection {
        let connection = try await LibPQConnection.open(self.configuration, on: .singleton, deadline: .now() + Self.connectTimeout)
        do throws(PostgresError) {
            connection.callDeadline = .now() + Self.connectTimeout
            defer { connection.callDeadline = nil }
            for channel in channels {
                // LISTEN takes an identifier, not a value; libpq quotes it.
                try await connection.executeScript("LISTEN \(try connection.quotedIdentifier(channel))")
            }
        } catch {
            connection.close()
            throw error
        }
        return connection
    }

    /// How long connecting and listening may wait for the server (the connect itself is
    /// bounded by libpq's `connect_timeout`).
    static let connectTimeout = TimeAmount.seconds(10)

    /// Hands notifications on until the connection is lost or the listener is stopped.
    private func relayNotifications(from connection: LibPQConnection) async {
        while !Task.isCancelled {
            switch await connection.waitForNotifications() {
            case .notifications(let notifications):
                for notification in notifications { self.deliver(.notification(notification), channel: notification.channel) }
            case .connectionLost, .cancelled:
                return
            }
        }
    }
}
