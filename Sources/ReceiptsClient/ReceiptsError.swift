import Foundation

/// An error answer of the Receipts service: its HTTP status and the contract's
/// `{"error":{"code","message"}}`.
///
/// Switch on `code` (a machine code of the contract), never on `message` (for people).
public struct ReceiptsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A machine code of the contract (`docs/api.md`, "Errors"). A struct rather than an
    /// enum so that a code a newer service adds is still readable here.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// 400: bad JSON, a bad id, too many ids, a value out of range. Nothing changed.
        public static let invalidRequest = Code(rawValue: "invalid_request")
        /// 401: a missing, wrong or expired credential.
        public static let unauthorized = Code(rawValue: "unauthorized")
        /// 403: the credential may not do this (another user, a chat it is not in).
        public static let forbidden = Code(rawValue: "forbidden")
        /// 404: an unknown chat or message (another tenant's looks the same).
        public static let notFound = Code(rawValue: "not_found")
        /// 405: a method the path does not take.
        public static let methodNotAllowed = Code(rawValue: "method_not_allowed")
        /// 409: a chat with other members or kind, a message id taken by another body.
        public static let conflict = Code(rawValue: "conflict")
        /// 426: `/v1/stream` without a WebSocket upgrade.
        public static let upgradeRequired = Code(rawValue: "upgrade_required")
        /// 413: a request body over 1 MiB.
        public static let payloadTooLarge = Code(rawValue: "payload_too_large")
        /// 415: a body declared as something other than JSON (the client always sends JSON).
        public static let unsupportedMediaType = Code(rawValue: "unsupported_media_type")
        /// 429: too many streams open for the user or the tenant, or the tenant over its
        /// bounds on the instance (its requests in flight, its share of a busy instance, its
        /// rate limit); the answer's `Retry-After` says when to try again. Not retried by the
        /// client.
        public static let rateLimited = Code(rawValue: "rate_limited")
        /// 503: PostgreSQL unreachable or too slow; idempotent calls are retried.
        public static let unavailable = Code(rawValue: "unavailable")
        /// 500: a bug of the service.
        public static let internalError = Code(rawValue: "internal_error")
        /// Not the service's: an answer without the contract's error body (a proxy's page).
        public static let unexpectedResponse = Code(rawValue: "unexpected_response")
        /// Not the service's: an answer larger than `ReceiptsClient.Configuration.maximumResponseBytes`.
        public static let responseTooLarge = Code(rawValue: "response_too_large")
    }

    /// The answer's HTTP status (0 when the error was found by the client).
    public var status: Int
    public var code: Code
    /// The service's explanation, for logs and people.
    public var message: String
    /// Seconds the service asked to wait before trying again (`Retry-After` of a 429 or a
    /// 503), when it said.
    public var retryAfter: Int?

    public init(status: Int, code: Code, message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    public var description: String { "Receipts \(status) \(code): \(message)" }

    /// The contract's error body.
    struct Body: Decodable {
        struct Detail: Decodable {
            var code: String
            var message: String
        }
        var error: Detail
    }

    /// The error an answer's body states, or `unexpectedResponse` when it states none.
    init(status: Int, body: Data, retryAfter: Int? = nil) {
        if let decoded = try? JSONDecoder().decode(Body.self, from: body) {
            self.init(status: status, code: Code(rawValue: decoded.error.code), message: decoded.error.message, retryAfter: retryAfter)
        } else {
            let text = String(decoding: body.prefix(200), as: UTF8.self)
            self.init(
                status: status, code: .unexpectedResponse, message: "HTTP \(status) without the contract's error body: \(text)",
                retryAfter: retryAfter)
        }
    }
}
