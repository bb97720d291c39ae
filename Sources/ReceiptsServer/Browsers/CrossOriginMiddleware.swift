import HTTPTypes
import Hummingbird
import NIOCore

/// Cross-origin resource sharing for web chat clients (docs/web-clients.md).
///
/// - A preflight (`OPTIONS` with `Origin`) on any `/v1/*` path answers 204 with the methods,
///   headers and max-age every route takes, and the origin it came from: it carries no
///   credential, so it answers alike for every origin and changes nothing. The actual request
///   then decides.
/// - Any other request with `Origin`: its answer, errors and `/v1/events` included, carries
///   `Access-Control-Allow-Origin: <origin>`, `Access-Control-Expose-Headers` (the
///   consistency token and the read source, for the page to read) and `Vary: Origin` when the
///   origin is allowed: by the server (`OriginPolicy.allowsForEveryTenant`), here, or by the
///   credential's tenant, which `AuthenticationMiddleware` decides (403 for a refused one,
///   before any handler). A 401 carries them for any origin: it reveals nothing, and lets a
///   web client tell an expired token from a network failure. Never `Allow-Credentials`: no
///   cookies are used.
/// - Requests without `Origin` (backends, curl, mobile apps) pass untouched, and so do those
///   whose `Origin` is no web page's (`OriginPolicy.browserOrigin`).
///
/// Hummingbird's `CORSMiddleware` is the model, but it decides a request's origin once,
/// before the route runs, from a fixed list; here the decision for most requests waits for
/// the credential's tenant, a 401 is shared with any origin, and the preflight's header
/// names keep the contract's spelling (`CORSMiddleware` writes their lowercased canonical
/// names). It sits right outside `ErrorMiddleware`, where every error is an `APIError` whose
/// headers it can add to.
struct CrossOriginMiddleware: RouterMiddleware {
    typealias Context = ReceiptsRequestContext

    let policy: OriginPolicy

    /// `Access-Control-Allow-Methods` of a preflight.
    static let allowedMethods = "GET, POST, PUT, PATCH, DELETE"
    /// `Access-Control-Allow-Headers` of a preflight: the credential, JSON bodies, the
    /// resume point of an event stream read with `fetch`, and the consistency token a read
    /// sends to see the caller's own writes (docs/api.md).
    static let allowedHeaders = "Authorization, Content-Type, Last-Event-ID, Receipts-Consistency-Token"
    /// `Access-Control-Expose-Headers` of an answer to an allowed origin: the headers beyond
    /// the CORS-safelisted ones that a page may read — a write's consistency token, to send
    /// with its next reads, and where a read was answered from.
    static let exposedHeaders = "Receipts-Consistency-Token, Receipts-Read-Source"
    /// How long a browser may keep a preflight's answer (`Access-Control-Max-Age`), seconds.
    static let preflightMaximumAge = 600

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = OriginPolicy.browserOrigin(of: request.headers) else {
            return try await next(request, context)
        }
        if request.method == .options, Self.isAPI(request.uri.path) {
            return Self.preflight(from: origin)
        }
        let browser = BrowserOrigin(origin: origin, allowed: self.policy.allowsForEveryTenant(origin, authority: request.head.authority))
        var context = context
        context.browserOrigin = browser
        do {
            var response = try await next(request, context)
            if browser.isAllowed { Self.share(&response.headers, with: origin) }
            return response
        } catch var error as APIError {
            if browser.isAllowed || error.status == .unauthorized { Self.share(&error.headers, with: origin) }
            throw error
        }
    }

    /// `/v1` and below.
    private static func isAPI(_ path: String) -> Bool {
        path == "/v1" || path.hasPrefix("/v1/")
    }

    /// The answer to a preflight (204, no body).
    static func preflight(from origin: String) -> Response {
        var headers: HTTPFields = [
            .accessControlAllowOrigin: origin,
            .accessControlAllowMethods: Self.allowedMethods,
            .accessControlAllowHeaders: Self.allowedHeaders,
            .accessControlMaxAge: String(Self.preflightMaximumAge),
        ]
        headers[values: .vary].append("Origin")
        return Response(status: .noContent, headers: headers)
    }

    /// Lets the browser hand the answer, and the headers it exposes, to a page of `origin`.
    static func share(_ headers: inout HTTPFields, with origin: String) {
        headers[.accessControlAllowOrigin] = origin
        headers[.accessControlExposeHeaders] = Self.exposedHeaders
        headers[values: .vary].append("Origin")
    }
}
