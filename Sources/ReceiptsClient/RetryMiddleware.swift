import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Repeats idempotent calls after a 503 or a connection error, as `RetryPolicy` says.
/// It sits outside `ErrorResponseMiddleware`, so a 503 reaches it as a `ReceiptsError`.
struct RetryMiddleware: ClientMiddleware {
    let policy: RetryPolicy

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        // A body that can be sent only once cannot be sent again.
        let replayable = body.map { $0.iterationBehavior == .multiple } ?? true
        guard RetryPolicy.isIdempotent(operationID), replayable, policy.maximumAttempts > 1 else {
            return try await next(request, body, baseURL)
        }
        var attempt = 1
        while true {
            do {
                return try await next(request, body, baseURL)
            } catch {
                guard attempt < policy.maximumAttempts, Self.isWorthRetrying(error) else { throw error }
                try await Task.sleep(for: policy.delay(beforeRetry: attempt))
                attempt += 1
            }
        }
    }

    /// A 503 (the database is away for a moment) or a failure to talk to the service at
    /// all; never another error answer, never a cancellation.
    static func isWorthRetrying(_ error: any Error) -> Bool {
        if let error = error as? ReceiptsError { return error.code == .unavailable }
        return !(error is CancellationError)
    }
}
