import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Sends the credential (a tenant key, a user token or the admin token) as
/// `Authorization: Bearer …` on every request; the document's security schemes are all
/// bearer credentials.
struct AuthenticationMiddleware: ClientMiddleware {
    let credential: String

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = "Bearer \(credential)"
        return try await next(request, body, baseURL)
    }
}
