import Hummingbird

/// Answers 405 `method_not_allowed` with an `Allow` header when a request's path is one of
/// the service's routes and its method is not one of that route's (RFC 9110, 15.5.6); 404
/// stays for paths that are no route at all.
///
/// Hummingbird's router answers both cases 404. Added last to the router, this middleware
/// wraps only the router's not-found responder, so matched requests never pass through it
/// and the table below is read only for requests that are answered 404 or 405 anyway.
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    /// One route's path segments (`nil` for a captured parameter) and its methods.
    private struct Route {
        let segments: [Substring?]
        var methods: [HTTPRequest.Method]
    }

    private let routes: [Route]

    /// - Parameter routes: every method and path the service answers, as `router.routes`
    ///   describes them (`/v1/chats/:chatId`).
    init(routes: [(method: HTTPRequest.Method, path: String)]) {
        var byPath: [String: Route] = [:]
        for (method, path) in routes {
            let segments = path.split(separator: "/").map { $0.hasPrefix(":") || $0.hasPrefix("{") ? nil : $0 }
            byPath[segments.map { $0.map(String.init) ?? "{}" }.joined(separator: "/"), default: Route(segments: segments, methods: [])]
                .methods.append(method)
        }
        self.routes = Array(byPath.values)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let allowed = self.methods(at: request.uri.path)
        guard !allowed.isEmpty, !allowed.contains(request.method) else {
            return try await next(request, context)
        }
        var error = APIError(.methodNotAllowed, .methodNotAllowed, "\(request.method.rawValue) is not allowed here")
        error.headers[.allow] = allowed.map(\.rawValue).sorted().joined(separator: ", ")
        throw error
    }

    /// The methods of the routes whose pattern the path matches; empty when none does.
    private func methods(at path: String) -> [HTTPRequest.Method] {
        let segments = path.split(separator: "/")
        var methods: [HTTPRequest.Method] = []
        for route in self.routes where route.segments.count == segments.count {
            if zip(route.segments, segments).allSatisfy({ $0.0 == nil || $0.0 == $0.1 }) {
                methods.append(contentsOf: route.methods)
            }
        }
        return methods
    }
}
