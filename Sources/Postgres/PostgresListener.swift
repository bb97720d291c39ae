import Logging
import NIOConcurrencyHelpers
import NIOPosix
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Listens on PostgreSQL channels over a dedicated connection and delivers notifications
/// as an `AsyncSequence`.
///
/// The connection waits on socket readiness (`poll` on `PQsocket`), so notifications arrive
/// as soon as the server sends them. When the connection drops, the listener reconnects with
/// exponential backoff, listens again, and emits `.listening(afterGap: true)`: notifications
/// sent while it was away are lost, so the consumer must catch up from a table.
///
/// Run it as a `Service`; `events` has a single consumer and finishes when `run()` returns.
public final class PostgresListener: Service, Sendable {
    /// What the listener reports, in order.
    public enum Event: Sendable, Hashable {
        /// `LISTEN` is in effect on a new connection. `afterGap` is true when an earlier
        /// connection was lost, so notifications in between may have been missed.
        case listening(afterGap: Bool)
        /// A notification on one of the channels.
        case notification(PostgresNotification)
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

    private struct State {
        var backendPID: Int32?
    }

    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let configuration: PostgresConfiguration
    private let channels: [String]
    private let backoff: Backoff
    private let logger: Logger
    /// One thread, blocked in `poll` while the listener waits.
    private let threadPool: NIOThreadPool
    private let wakePipe: WakePipe
    private let state = NIOLockedValueBox(State())

    public init(
        configuration: PostgresConfiguration,
        channels: [String],
        backoff: Backoff = Backoff(),
        logger: Logger
    ) {
        (self.events, self.continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        self.configuration = configuration
        self.channels = channels
        self.backoff = backoff
        self.logger = logger
        self.threadPool = NIOThreadPool(numberOfThreads: 1)
        self.threadPool.start()
        self.wakePipe = WakePipe()
    }

    deinit {
        self.threadPool.shutdownGracefully { _ in }
    }

    /// Whether `LISTEN` is currently in effect (for readiness checks).
    public var isListening: Bool { self.state.withLockedValue { $0.backendPID != nil } }

    /// The server process of the current listening connection, if any.
    public var backendPID: Int32? { self.state.withLockedValue { $0.backendPID } }

    /// Listens until cancelled or gracefully shut down.
    public func run() async throws {
        defer { self.continuation.finish() }
        await cancelWhenGracefulShutdown {
            await withTaskCancellationHandler {
                await self.listenUntilCancelled()
            } onCancel: {
                self.wakePipe.signal()
            }
        }
    }

    private func listenUntilCancelled() async {
        var failures = 0
        var hasListened = false
        while !Task.isCancelled {
            let connection: LibPQConnection
            do {
                connection = try await self.connectAndListen()
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
            self.logger.debug("postgres listener listening", metadata: ["postgres.channels": "\(self.channels)"])
            self.continuation.yield(.listening(afterGap: hasListened))
            hasListened = true

            await self.relayNotifications(from: connection)

            self.state.withLockedValue { $0.backendPID = nil }
            _ = try? await self.threadPool.runIfActive { connection.close() }
            if !Task.isCancelled {
                self.logger.warning("postgres listener lost its connection; reconnecting")
            }
        }
    }

    private func connectAndListen() async throws -> LibPQConnection {
        let configuration = self.configuration
        let channels = self.channels
        return try await self.threadPool.runIfActive {
            let connection = try LibPQConnection.connect(configuration)
            do {
                for channel in channels {
                    // LISTEN takes an identifier, not a value; libpq quotes it.
                    try connection.executeScript("LISTEN \(try connection.quotedIdentifier(channel))")
                }
            } catch {
                connection.close()
                throw error
            }
            return connection
        }
    }

    /// Yields notifications until the connection is lost or the listener is stopped.
    private func relayNotifications(from connection: LibPQConnection) async {
        let wakeDescriptor = self.wakePipe.readDescriptor
        while !Task.isCancelled {
            let outcome = try? await self.threadPool.runIfActive {
                connection.waitForNotifications(wakeDescriptor: wakeDescriptor)
            }
            switch outcome {
            case .notifications(let notifications):
                for notification in notifications { self.continuation.yield(.notification(notification)) }
            case .connectionLost, .woken, nil:
                return
            }
        }
    }
}

/// A pipe whose read end becomes readable, for good, once `signal()` is called: it wakes a
/// thread blocked in `poll` when the listener stops.
private final class WakePipe: Sendable {
    let readDescriptor: Int32
    private let writeDescriptor: Int32

    init() {
        var descriptors: [Int32] = [-1, -1]
        let status = pipe(&descriptors)
        precondition(status == 0, "could not create a pipe: errno \(errno)")
        self.readDescriptor = descriptors[0]
        self.writeDescriptor = descriptors[1]
    }

    func signal() {
        var byte: UInt8 = 1
        _ = write(self.writeDescriptor, &byte, 1)
    }

    deinit {
        close(self.readDescriptor)
        close(self.writeDescriptor)
    }
}
