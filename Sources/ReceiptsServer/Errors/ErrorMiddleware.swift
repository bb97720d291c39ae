import Hummingbird
import Logging

/// Turns every error into the contract's error shape: our `APIError`s as they are,
/// Hummingbird's own (no route, bad body) into the matching code, anything else into a
/// 500 whose details go to the log only.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            throw error
        } catch let error as HTTPError {
            throw Self.apiError(for: error)
        } catch {
            context.logger.error("request failed", metadata: ["error": "\(error)"])
            throw APIError(.internalServerError, .internalError, "internal error")
        }
    }

    static func apiError(for error: HTTPError) -> APIError {
        switch error.status {
        case .notFound: .notFound()
        case .methodNotAllowed: APIError(.methodNotAllowed, .methodNotAllowed, "method not allowed")
        case .contentTooLarge: APIError(.contentTooLarge, .payloadTooLarge, "the request body is larger than 1 MiB")
        case .unauthorized: .unauthorized()
        case .forbidden: .forbidden(error.body ?? "forbidden")
        case .badRequest, .unprocessableContent: .invalidRequest(error.body ?? "malformed request")
        default: APIError(error.status, .invalidRequest, error.body ?? error.status.reasonPhrase)
        }
    }
}
