import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// Sends one webhook's batches: `POST <url>` with AsyncHTTPClient, keeping its connection
/// for the next batch, following no redirects, and answering within `timeout` or not at all.
///
/// The address check is made on the address connected to: the sender resolves the URL's host
/// itself, keeps the first address `WebhookAddressPolicy` allows (IPv4 first), and pins the
/// client to it (`dnsOverride`: TLS still verifies the certificate and sends SNI for the
/// host name), so a name that resolves to a refused address cannot be reached, however its
/// DNS answers change. The resolution is kept for 30 s, and dropped after a failed attempt.
///
/// Used by one `WebhookDelivery` task at a time.
final class WebhookSender {
    /// What an attempt came to.
    enum Outcome: Sendable, Equatable {
        /// A 2xx answer: the batch is acknowledged.
        case acknowledged
        /// `retryAfter`: a 429 or 503 said when to try again (`Retry-After`, at most an hour).
        case failed(Failure, String, retryAfter: Duration? = nil)
    }

    /// Why an attempt failed: the `outcome` label of `receipts_webhook_deliveries_total`.
    enum Failure: String, Sendable {
        /// An answer other than 2xx (and 410).
        case status = "http_status"
        /// 410 Gone: the receiver asks for no more deliveries (the webhook is disabled).
        case gone
        /// No answer within the attempt's time.
        case timeout
        /// No connection, or it broke.
        case connection = "connection_failed"
        /// The host resolves only to addresses webhooks may not reach (or not at all).
        case address = "address_refused"
    }

    /// How long a resolution of the host is kept.
    static let resolutionLifetime = Duration.seconds(30)
    /// The longest wait a `Retry-After` is followed for; a longer one counts as this.
    static let longestRetryAfter = Duration.seconds(3600)
    /// The most of an answer's body read (to keep the connection); the rest is dropped.
    static let maximumAnswerBytes = 64 * 1024

    private let policy: WebhookAddressPolicy
    private let timeout: Duration
    private let logger: Logger
    private var client: (client: HTTPClient, host: String, pinned: String?)?
    /// The status the receiver answered the last attempt with; nil when no answer came.
    private(set) var lastStatus: Int?
    private var resolved: (host: String, address: SocketAddress, at: ContinuousClock.Instant)?

    init(policy: WebhookAddressPolicy, timeout: Duration, logger: Logger) {
        self.policy = policy
        self.timeout = timeout
        self.logger = logger
    }

    /// POSTs `body` with `headers` to `target`.
    func send(_ body: [UInt8], headers: HTTPHeaders, to target: WebhookTarget) async -> Outcome {
        let client: HTTPClient
        do {
            client = try await self.client(for: target)
        } catch let error as RefusedAddress {
            self.resolved = nil
            return .failed(.address, error.message)
        } catch {
            self.resolved = nil
            return .failed(.connection, "could not resolve \(target.host): \(error)")
        }
        self.lastStatus = nil
        var request = HTTPClientRequest(url: target.url)
        request.method = .POST
        request.headers = headers
        request.body = .bytes(ByteBuffer(bytes: body))
        let timeout = self.timeout
        let logger = self.logger
        let prepared = request
        let outcome: Outcome
        do {
            let status = try await withTimeout(timeout) {
                let response = try await client.execute(prepared, deadline: .now() + TimeAmount(timeout), logger: logger)
                // Read (a bounded part of) the answer, so that the connection can carry the next batch.
                _ = try? await response.body.collect(upTo: Self.maximumAnswerBytes)
                return (response.status, response.headers.first(name: "Retry-After"))
            }
            self.lastStatus = Int(status.0.code)
            switch status.0.code {
            case 200..<300:
                outcome = .acknowledged
            case 410:
                outcome = .failed(.gone, "the receiver answered 410 Gone: the webhook is disabled until a PUT enables it")
            case 429, 503:
                let wait = status.1.flatMap { Self.retryAfter($0, now: Date()) }
                outcome = .failed(
                    .status, "the receiver answered \(status.0.code)" + (wait.map { ", Retry-After \($0)" } ?? ""), retryAfter: wait)
            default:
                outcome = .failed(.status, "the receiver answered \(status.0.code)")
            }
        } catch is TimedOut {
            outcome = .failed(.timeout, "no answer within \(timeout)")
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            outcome = .failed(.timeout, "no answer within \(timeout)")
        } catch {
            outcome = .failed(.connection, "the request failed: \(error)")
        }
        if outcome != .acknowledged { self.resolved = nil }
        return outcome
    }

    /// How long a `Retry-After` value asks to wait: delay-seconds or an HTTP-date, at most
    /// `longestRetryAfter` (a date in the past: no wait); nil when it is neither.
    static func retryAfter(_ value: String, now: Date) -> Duration? {
        let text = value.trimmingCharacters(in: .whitespaces)
        let seconds: Double
        if let delay = Int64(text) {
            guard delay >= 0 else { return nil }
            seconds = Double(delay)
        } else {
            let format = DateFormatter()
            format.locale = Locale(identifier: "en_US_POSIX")
            format.timeZone = TimeZone(identifier: "GMT")
            format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            guard let date = format.date(from: text) else { return nil }
            seconds = max(0, date.timeIntervalSince(now))
        }
        return min(.milliseconds(Int64(min(seconds, 3600 * 2) * 1000)), Self.longestRetryAfter)
    }

    /// Ends the client's connections.
    func shutdown() async {
        if let client = self.client?.client { try? await client.shutdown() }
        self.client = nil
    }

    /// The client pinned to a checked address of `target`'s host (a new one when the address
    /// changed).
    private func client(for target: WebhookTarget) async throws -> HTTPClient {
        let pinned: String?
        if let literal = WebhookAddressPolicy.literal(target.host) {
            guard self.policy.allows(literal) else {
                throw RefusedAddress(message: "\(target.host) is an address webhooks may not reach")
            }
            pinned = nil
        } else {
            pinned = try await self.checkedAddress(of: target).ipAddress
        }
        if let current = self.client, current.host == target.host, current.pinned == pinned { return current.client }
        await self.shutdown()
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: TimeAmount(self.timeout), read: TimeAmount(self.timeout)),
            decompression: .disabled
        )
        if let pinned { configuration.dnsOverride = [target.host: pinned] }
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        self.client = (client, target.host, pinned)
        return client
    }

    private func checkedAddress(of target: WebhookTarget) async throws -> SocketAddress {
        if let resolved, resolved.host == target.host, ContinuousClock.now - resolved.at < Self.resolutionLifetime {
            return resolved.address
        }
        let addresses = try await Self.resolve(target.host, port: target.port)
        let allowed = addresses.filter(self.policy.allows)
        guard let address = allowed.first(where: { $0.protocol == .inet }) ?? allowed.first else {
            throw RefusedAddress(
                message: addresses.isEmpty
                    ? "\(target.host) has no address"
                    : "\(target.host) resolves only to addresses webhooks may not reach")
        }
        self.resolved = (target.host, address, .now)
        return address
    }

    /// The addresses of `host` (`getaddrinfo`, on a thread of NIO's blocking pool, never on
    /// an event loop; bounded by the resolver's own timeouts).
    static func resolve(_ host: String, port: Int) async throws -> [SocketAddress] {
        try await NIOThreadPool.singleton.runIfActive {
            var hints = addrinfo()
            hints.ai_family = AF_UNSPEC
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            let status = getaddrinfo(host, String(port), &hints, &list)
            guard status == 0, let first = list else {
                throw ResolutionFailure(message: String(cString: gai_strerror(status)))
            }
            defer { freeaddrinfo(first) }
            var addresses: [SocketAddress] = []
            var next: UnsafeMutablePointer<addrinfo>? = first
            while let info = next {
                if let raw = info.pointee.ai_addr {
                    switch info.pointee.ai_family {
                    case AF_INET:
                        raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { addresses.append(SocketAddress($0.pointee, host: host)) }
                    case AF_INET6:
                        raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { addresses.append(SocketAddress($0.pointee, host: host)) }
                    default:
                        break
                    }
                }
                next = info.pointee.ai_next
            }
            return addresses
        }
    }

    struct RefusedAddress: Error {
        let message: String
    }

    struct ResolutionFailure: Error, CustomStringConvertible {
        let message: String
        var description: String { self.message }
    }
}

/// `body` raced against `limit`: its result, or `TimedOut` (and `body` cancelled).
func withTimeout<Result: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
    try await withThrowingTaskGroup(of: Result?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let result = first else { throw TimedOut() }
        return result
    }
}

/// `withTimeout`'s limit passed.
struct TimedOut: Error {}
