import AsyncHTTPClient
import Foundation
import NIOCore
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime

/// A client of the Receipts service for a chat backend (or a device, with a user token).
///
/// ```swift
/// let receipts = ReceiptsClient(baseURL: URL(string: "http://127.0.0.1:8080")!, credential: apiKey)
/// try await receipts.createChat("team", members: ["alice", "bob"])
/// let message = try await receipts.send("Hi!", in: "team", from: "alice")
/// try await receipts.markMessagesAsRead(chatID: "team", messageIDs: [message.id], by: "bob")
/// for try await event in receipts.events() { … }
/// ```
///
/// The calls are shaped like a product spec's; each is one operation of the client
/// generated from `openapi.yaml` (`generated`, for anything the face does not cover). A
/// 4xx/5xx answer throws `ReceiptsError` with the contract's `code`; idempotent calls are
/// retried after a 503 or a connection error (`Configuration.retry`), other calls never.
/// Reads see the client's own writes, even when a read replica answers them
/// (`consistencyToken`).
public struct ReceiptsClient: Sendable {
    /// Deadlines and bounds of the client. Every wait has one.
    public struct Configuration: Sendable {
        /// How long a call may wait for its answer's head, each attempt.
        public var requestTimeout: Duration
        /// Which calls are repeated after a 503 or a connection error, and how.
        public var retry: RetryPolicy
        /// The largest answer body the client buffers (a page of 1,000 long messages is
        /// tens of MiB).
        public var maximumResponseBytes: Int
        /// How `events(resumingAfter:)` reconnects and what it tolerates.
        public var events: EventStreamConfiguration

        public init(
            requestTimeout: Duration = .seconds(30),
            retry: RetryPolicy = RetryPolicy(),
            maximumResponseBytes: Int = 128 << 20,
            events: EventStreamConfiguration = EventStreamConfiguration()
        ) {
            self.requestTimeout = requestTimeout
            self.retry = retry
            self.maximumResponseBytes = maximumResponseBytes
            self.events = events
        }
    }

    /// The client generated from `openapi.yaml`, with the same credential, error mapping
    /// and retries as the face: every operation of the document, by its `operationId`.
    public let generated: Client
    public let configuration: Configuration
    /// The consistency token the client holds, shared by its copies (`consistencyToken`).
    let consistencyTokens: ConsistencyTokenBox

    /// - Parameters:
    ///   - baseURL: where the service listens, e.g. `http://127.0.0.1:8080`.
    ///   - credential: a tenant's API key (a backend), a user token (a device), or the
    ///     operator's admin token (`createTenant` only).
    ///   - httpClient: the AsyncHTTPClient to use; by default one shared by every
    ///     `ReceiptsClient` of the process, with connect and read timeouts set (give one of
    ///     your own a `read` timeout too: it is what ends an event stream gone silent).
    ///   - middlewares: more middlewares (logging, tracing), run for every attempt, after
    ///     the credential is set and before the answer is checked.
    public init(
        baseURL: URL, credential: String, configuration: Configuration = Configuration(), httpClient: HTTPClient? = nil,
        middlewares: [any ClientMiddleware] = []
    ) {
        let transport = AsyncHTTPClientTransport(
            configuration: .init(client: httpClient ?? Self.sharedHTTPClient, timeout: TimeAmount(configuration.requestTimeout)))
        self.init(baseURL: baseURL, credential: credential, configuration: configuration, transport: transport, middlewares: middlewares)
    }

    /// A client over another transport of swift-openapi-runtime (URLSession's on Apple
    /// platforms, say); it must bound its own waits as the default one does.
    public init(
        baseURL: URL, credential: String, configuration: Configuration = Configuration(), transport: any ClientTransport,
        middlewares: [any ClientMiddleware] = []
    ) {
        let consistencyTokens = ConsistencyTokenBox()
        self.configuration = configuration
        self.consistencyTokens = consistencyTokens
        self.generated = Client(
            serverURL: baseURL,
            configuration: OpenAPIRuntime.Configuration(dateTranscoder: .iso8601WithFractionalSeconds),
            transport: transport,
            middlewares: [
                RetryMiddleware(policy: configuration.retry),
                AuthenticationMiddleware(credential: credential),
                ConsistencyTokenMiddleware(tokens: consistencyTokens),
                ErrorResponseMiddleware(),
                ResponseSizeLimitMiddleware(maximumBytes: configuration.maximumResponseBytes),
            ] + middlewares
        )
    }

    /// One HTTP client for every `ReceiptsClient` of the process (never shut down, like
    /// `HTTPClient.shared`), with deadlines the shared one lacks: 5 s to connect, and 45 s
    /// without a byte read fails a request, which also ends an event stream that went
    /// silent (the service sends a comment every 15 s).
    static let sharedHTTPClient = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: HTTPClient.Configuration(timeout: .init(connect: .seconds(5), read: .seconds(45)))
    )

    /// The error for an answer the face has no use for (an undocumented status, or a
    /// documented one that is no success).
    static func unexpected(_ output: some Sendable, _ operation: String) -> ReceiptsError {
        ReceiptsError(status: 0, code: .unexpectedResponse, message: "\(operation) answered \(output)")
    }

    /// Runs a call of the generated client, throwing what the middlewares threw (a
    /// `ReceiptsError`, a connection error) rather than the runtime's wrapper around it.
    static func call<Output>(_ body: () async throws -> Output) async throws -> Output {
        do {
            return try await body()
        } catch let error as ClientError {
            throw error.underlyingError
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
