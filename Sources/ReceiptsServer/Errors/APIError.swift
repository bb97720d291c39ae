import Foundation
import Hummingbird
import ReceiptsJSON

/// An error answered in the contract's shape:
/// `{"error": {"code": "<machine_code>", "message": "<human text>"}}`.
///
/// The message is written for the API's user; internal errors never reach it.
public struct APIError: HTTPResponseError, Sendable {
    /// The machine-readable codes of the OpenAPI document, `Error`.
    public struct Code: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let invalidRequest = Code(rawValue: "invalid_request")
        public static let unauthorized = Code(rawValue: "unauthorized")
        public static let forbidden = Code(rawValue: "forbidden")
        public static let notFound = Code(rawValue: "not_found")
        public static let methodNotAllowed = Code(rawValue: "method_not_allowed")
        public static let conflict = Code(rawValue: "conflict")
        public static let upgradeRequired = Code(rawValue: "upgrade_required")
        public static let payloadTooLarge = Code(rawValue: "payload_too_large")
        public static let unsupportedMediaType = Code(rawValue: "unsupported_media_type")
        public static let rateLimited = Code(rawValue: "rate_limited")
        public static let unavailable = Code(rawValue: "unavailable")
        public static let internalError = Code(rawValue: "internal_error")
    }

    public let status: HTTPResponse.Status
    public let code: Code
    public let message: String
    /// Headers the answer needs besides the body's (`Allow` on a 405, `Upgrade` on a 426).
    public var headers: HTTPFields

    public init(_ status: HTTPResponse.Status, _ code: Code, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    public static func invalidRequest(_ message: String) -> APIError { APIError(.badRequest, .invalidRequest, message) }
    public static func unauthorized(_ message: String = "missing or invalid credentials") -> APIError {
        APIError(.unauthorized, .unauthorized, message)
    }
    public static func forbidden(_ message: String) -> APIError { APIError(.forbidden, .forbidden, message) }
    public static func notFound(_ message: String = "not found") -> APIError { APIError(.notFound, .notFound, message) }
    public static func conflict(_ message: String) -> APIError { APIError(.conflict, .conflict, message) }

    /// `{"error":{"code":…,"message":…}}`
    private struct Body: Encodable {
        struct Detail: Encodable {
            let code: String
            let message: String
        }

        let error: Detail
    }

    /// The answer's body.
    var json: String {
        get throws {
            var json = JSONWriter(capacity: 64 + self.message.utf8.count)
            try json.encode(Body(error: .init(code: self.code.rawValue, message: self.message)))
            return json.text
        }
    }

    /// The answer's headers: `headers`, the JSON content type, and `WWW-Authenticate` on a 401.
    var responseHeaders: HTTPFields {
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        if self.status == .unauthorized { headers[.wwwAuthenticate] = "Bearer" }
        return headers
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(status: self.status, headers: self.responseHeaders, body: .init(byteBuffer: ByteBuffer(string: try self.json)))
    }
}
