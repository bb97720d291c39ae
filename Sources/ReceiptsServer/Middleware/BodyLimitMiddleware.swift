import Hummingbird
import NIOCore

/// Refuses any request body over 1 MiB with 413 `payload_too_large`, whatever the route and
/// whatever the body contains; but an import's, which `ImportController` reads as it
/// arrives, up to `RECEIPTS_IMPORT_MAX_BYTES`.
///
/// Two places, so that nothing is read before the caller is known: in front of every route
/// (`readsBody: false`) a declared `Content-Length` over the limit is refused without
/// reading a byte; behind authentication (`readsBody: true`) the body, chunked or not, is
/// read up to the limit. An unauthenticated request gets its 401 with its body unread (the
/// connection then closes, see `HTTPConnectionGuard`).
struct BodyLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    static var maximumBytes: Int { RequestBodyLimit.maximumBytes }

    /// Whether the body is read here (behind authentication) or only its declared length
    /// checked (in front of it).
    let readsBody: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !ImportController.isUpload(request) else { return try await next(request, context) }
        if let length = request.headers[.contentLength].flatMap(Int.init), length > Self.maximumBytes {
            throw RequestBodyLimit.exceeded
        }
        guard self.readsBody else { return try await next(request, context) }
        var request = request
        do {
            _ = try await request.collectBody(upTo: Self.maximumBytes)
        } catch is NIOTooManyBytesError {
            throw RequestBodyLimit.exceeded
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw RequestBodyLimit.exceeded
        }
        return try await next(request, context)
    }
}

/// The contract (the OpenAPI document's `info`): any request body over 1 MiB is 413.
enum RequestBodyLimit {
    static let maximumBytes = 1024 * 1024

    static var exceeded: APIError {
        APIError(.contentTooLarge, .payloadTooLarge, "the request body is larger than 1 MiB")
    }
}
