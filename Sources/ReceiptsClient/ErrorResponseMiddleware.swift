import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Turns every 4xx/5xx answer into a thrown `ReceiptsError` carrying the contract's code,
/// in one place, so neither the face nor a caller of the generated client has to switch
/// over each operation's documented error statuses.
struct ErrorResponseMiddleware: ClientMiddleware {
    /// An error body is small (`{"error":{…}}`); anything longer is cut, not buffered.
    static let maximumErrorBodyBytes = 16 * 1024

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let (response, responseBody) = try await next(request, body, baseURL)
        guard response.status.code >= 400 else { return (response, responseBody) }
        var bytes = Data()
        if let responseBody {
            for try await chunk in responseBody {
                bytes.append(contentsOf: chunk.prefix(Self.maximumErrorBodyBytes - bytes.count))
                if bytes.count >= Self.maximumErrorBodyBytes { break }
            }
        }
        // Seconds only (the service never sends an HTTP date), at most an hour.
        let retryAfter = response.headerFields[.retryAfter].flatMap { Int($0) }.map { min(max($0, 0), 3600) }
        throw ReceiptsError(status: response.status.code, body: bytes, retryAfter: retryAfter)
    }
}
