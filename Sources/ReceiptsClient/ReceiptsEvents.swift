import Foundation
import OpenAPIRuntime
import Synchronization

extension ReceiptsClient {
    /// The events the credential sees, as they happen, over Server-Sent Events
    /// (`GET /v1/events`).
    ///
    /// Returns once the stream is open (after reconnecting as below if need be): every
    /// event committed from then on is in the sequence. It never ends by itself: when the
    /// connection ends (the service restarts, shuts down, or a network fails) it reconnects
    /// with the last event's id, so every event arrives once and in order across
    /// reconnections, and the consumer writes no resume logic. When the position has
    /// expired, the service answers with a `resyncRequired` event: reload what you show,
    /// the sequence carries on after it. Reconnections wait a growing, bounded pause
    /// (`Configuration.events`); after too many failures in a row, or an error that
    /// retrying cannot fix (401, 403), iterating throws. Stop by cancelling the consuming
    /// task.
    ///
    /// - Parameter lastEventID: resume after this event (one the consumer stored);
    ///   `nil` starts with the events committed after the stream opens.
    public func events(resumingAfter lastEventID: String? = nil) async throws -> ReceiptsEvents {
        var iterator = ReceiptsEvents.AsyncIterator(client: self, lastEventID: lastEventID)
        try await iterator.connectIfNeeded()
        return ReceiptsEvents(client: self, lastEventID: lastEventID, opened: iterator)
    }
}

/// The `AsyncSequence` of `ReceiptsClient.events(resumingAfter:)`; each iterator holds one
/// connection at a time and pulls from it, so a slow consumer slows the stream (the
/// service ends a stream that falls too far behind; the iterator then resumes).
public struct ReceiptsEvents: AsyncSequence, Sendable {
    public typealias Element = ReceiptsEvent
    let client: ReceiptsClient
    let lastEventID: String?
    private let opened: OpenedIterator

    init(client: ReceiptsClient, lastEventID: String?, opened: AsyncIterator) {
        self.client = client
        self.lastEventID = lastEventID
        self.opened = OpenedIterator(opened)
    }

    /// The first iteration gets the stream `events(resumingAfter:)` opened; another one
    /// opens its own from the same position.
    public func makeAsyncIterator() -> AsyncIterator {
        opened.take() ?? AsyncIterator(client: client, lastEventID: lastEventID)
    }

    /// The iterator opened by `events(resumingAfter:)`, handed to one iteration only. Its
    /// connection is not `Sendable`; the lock makes sure exactly one task ever takes it.
    private final class OpenedIterator: @unchecked Sendable {
        private let lock = Mutex(())
        private var iterator: AsyncIterator?

        init(_ iterator: AsyncIterator) { self.iterator = iterator }

        func take() -> AsyncIterator? {
            lock.withLock { _ in
                defer { iterator = nil }
                return iterator
            }
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let client: ReceiptsClient
        /// The id of the last event handed out: where the next connection resumes.
        public private(set) var lastEventID: String?
        private var connection: (any AsyncIteratorProtocol<ServerSentEvent, any Error>)?
        private var connectedAt = ContinuousClock.now
        private var failures = 0

        init(client: ReceiptsClient, lastEventID: String?) {
            self.client = client
            self.lastEventID = lastEventID
        }

        public mutating func next() async throws -> ReceiptsEvent? {
            let configuration = client.configuration.events
            while true {
                try await connectIfNeeded()
                do {
                    guard let received = try await connection?.next() else {
                        // The service ended the stream (`: closed: <reason>`): resume.
                        connection = nil
                        try fail(with: nil, configuration)
                        continue
                    }
                    guard let data = received.data else { continue }
                    let event = try ReceiptsEvent(json: Data(data.utf8))
                    lastEventID = event.id
                    failures = 0
                    return event
                } catch {
                    connection = nil
                    try fail(with: error, configuration)
                }
            }
        }

        /// Opens a stream after `lastEventID` unless one is open, pausing and retrying as
        /// the configuration says.
        mutating func connectIfNeeded() async throws {
            let configuration = client.configuration.events
            while connection == nil {
                try Task.checkCancellation()
                if failures > 0 { try await Task.sleep(for: reconnectDelay(configuration)) }
                do {
                    connection = try await connect(configuration)
                    connectedAt = .now
                } catch {
                    try fail(with: error, configuration)
                }
            }
        }

        /// Opens `GET /v1/events` after `lastEventID`.
        private func connect(_ configuration: EventStreamConfiguration) async throws -> any AsyncIteratorProtocol<ServerSentEvent, any Error> {
            let output = try await ReceiptsClient.call {
                try await client.generated.eventSource(headers: .init(lastEventID: lastEventID))
            }
            let body = try output.ok.body.textEventStream
            return EventBytes(upstream: body, maximumEventBytes: configuration.maximumEventBytes)
                .asDecodedServerSentEvents()
                .makeAsyncIterator()
        }

        /// Counts a connection that failed or ended, or throws when retrying cannot help
        /// or has been tried too often in a row.
        private mutating func fail(with error: (any Error)?, _ configuration: EventStreamConfiguration) throws {
            if let error {
                if error is CancellationError || Task.isCancelled { throw CancellationError() }
                if let error = error as? ReceiptsError, ![.unavailable, .rateLimited].contains(error.code), error.status != 0 {
                    throw error
                }
            }
            // A connection that lasted a while was no failure to back off from.
            if ContinuousClock.now - connectedAt > .seconds(60) { failures = 0 }
            failures += 1
            if failures > configuration.maximumConsecutiveFailures {
                throw error ?? ReceiptsError(status: 0, code: .unavailable, message: "the event stream ended \(failures) times in a row")
            }
        }

        private func reconnectDelay(_ configuration: EventStreamConfiguration) -> Duration {
            var delay = configuration.initialReconnectDelay
            for _ in 1..<Swift.min(failures, 30) where delay < configuration.maximumReconnectDelay { delay *= 2 }
            return Swift.min(delay, configuration.maximumReconnectDelay) * Double.random(in: 0.5...1.0)
        }
    }
}
