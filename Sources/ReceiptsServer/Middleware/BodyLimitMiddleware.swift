import Hummingbird

/// Refuses any request body over 1 MiB with 413, whatever the route and whatever the body
/// contains, before authentication or parsing look at it.
struct BodyLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    static var maximumBytes: Int { 1024 * 1024 }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > Self.maximumBytes {
            throw Self.tooLarge
        }
        var request = request
        do {
            _ = try await request.collectBody(upTo: Self.maximumBytes)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw Self.tooLarge
        }
        return try await next(request, context)
    }

    static var tooLarge: APIError {
        APIError(.contentTooLarge, .payloadTooLarge, "the request body is larger than 1 MiB")
    }
}
