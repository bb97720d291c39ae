import Hummingbird
import Logging
import Postgres
import ReceiptsLive
import ReceiptsStore

/// Turns every error into the contract's error shape: our `APIError`s as they are,
/// Hummingbird's own (no route, bad body) into the matching code, the live layer's (a hub
/// not ready, a stream over its caps) into 503 and 429, a database that is
/// unreachable, overloaded or too slow into 503 `unavailable` (the client retries), and
/// anything else into a 500 whose details go to the log only.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            throw Self.apiError(for: error, logger: context.logger)
        }
    }

    /// The answer the contract gives for `error` (logged when it is the service's fault).
    static func apiError(for error: any Error, logger: Logger) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as HTTPError:
            return Self.apiError(for: error)
        case is EventLogNotReady:
            return APIError(.serviceUnavailable, .unavailable, "the event stream is not ready yet; retry")
        case let refusal as StreamLimiter.Refusal:
            return APIError(.tooManyRequests, .rateLimited, refusal.message)
        case let error as PostgresError where error.isUnavailability:
            logger.notice("database unavailable", metadata: Self.metadata(of: error))
            return Self.unavailable
        case is CancellationError:
            // The request's task was cancelled (its client left, or the service stops) while it
            // waited for the database.
            return Self.unavailable
        case let error as PostgresError:
            // Never the whole error: its detail (and a value in its message) can carry data.
            logger.error("request failed", metadata: Self.metadata(of: error))
            return APIError(.internalServerError, .internalError, "internal error")
        default:
            logger.error("request failed", metadata: ["error": "\(error)"])
            return APIError(.internalServerError, .internalError, "internal error")
        }
    }

    /// What the contract answers while PostgreSQL cannot serve requests.
    static var unavailable: APIError {
        APIError(.serviceUnavailable, .unavailable, "the database is unavailable; retry")
    }

    /// What may be logged of a database error: its kind and SQLSTATE, never its text, which
    /// can quote the values of a statement.
    static func metadata(of error: PostgresError) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["postgres.error": "\(error.code)"]
        if let sqlState = error.sqlState { metadata["postgres.sqlstate"] = "\(sqlState)" }
        if let constraint = error.constraint { metadata["postgres.constraint"] = "\(constraint)" }
        return metadata
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
