import Foundation
import Hummingbird
import ReceiptsCore
import ReceiptsStore

/// Turns a bearer credential into a `Principal`: an API key (`rk_…`) into its tenant, a
/// user token into its tenant and user.
///
/// API keys and the tenants tokens name are looked up in the store's `CredentialDirectory`,
/// in memory: an unknown key or a token naming an unknown tenant costs no query of its own
/// (at most one reload of the directory a second, whatever their number). A key replaced
/// with `receiptsd tenant create --replace-key` stops working within the directory's
/// `maximumAge` (60 s) at the latest; a key removed, tokens revoked or a secret rotated (on
/// any instance) are refused once `CredentialChanges` hears of it, within about a second; a
/// tenant created by another process works within its `reloadAfterMiss` (1 s), and one created
/// through this process at once.
///
/// When the database cannot be asked, the request fails as unavailable (503), never as
/// unauthorized (401): clients discard a credential answered 401.
final class Authenticator: Sendable {
    private let store: ReceiptsStore
    let userTokens: UserTokens
    /// News of changed credentials, from every instance: invalidates the directory and wakes
    /// the streams whose credential may have ended.
    let changes: CredentialChanges
    /// The API keys requests used since they were last recorded (`last_used_at`).
    let keyUse = APIKeyUse()

    init(store: ReceiptsStore, userTokens: UserTokens) {
        self.store = store
        self.userTokens = userTokens
        self.changes = CredentialChanges(directory: store.credentials)
    }

    /// The caller named by `credential`.
    ///
    /// - Parameter knownWithin: how old what is known of API keys may be, when younger than
    ///   the directory's `maximumAge` (a stream's re-check of its credential).
    /// - Throws: 401 for anything that is not a valid API key or user token.
    func principal(for credential: String, knownWithin: Duration? = nil) async throws -> Principal {
        if credential.hasPrefix(APIKeys.prefix) {
            let hash = APIKeys.hash(credential)
            guard let tenant = try await self.store.credentials.tenant(apiKeyHash: hash, maximumAge: knownWithin) else {
                throw APIError.unauthorized()
            }
            self.keyUse.used(hash)
            return .tenant(tenant)
        }
        guard let (tenant, user) = try await self.userTokens.verify(credential) else {
            throw APIError.unauthorized("invalid or expired token")
        }
        return .user(tenant: tenant, user: user)
    }

    /// The credential of a stream request: the bearer credential, or the `token` query
    /// parameter that browsers must use for WebSocket and EventSource.
    ///
    /// `?token=` takes user tokens only: URLs end up in the logs of proxies and browsers, where
    /// a short-lived token of one user may be, a tenant's API key may not (it belongs in the
    /// `Authorization` header). An API key there counts as no credential (401).
    static func credential(of request: Request) -> String? {
        if let bearer = bearerCredential(of: request) { return bearer }
        guard let token = request.uri.queryParameters.get("token"), !token.isEmpty, !token.hasPrefix(APIKeys.prefix) else {
            return nil
        }
        return token
    }

    /// The bearer credential of a request (`Authorization: Bearer …`, the scheme in any case,
    /// blanks around the credential ignored).
    ///
    /// Compares bytes: this runs on every request, and splitting, lowercasing and Foundation's
    /// trimming cost 3 % of the service's time per request.
    static func bearerCredential(of request: Request) -> String? {
        request.headers[.authorization].flatMap(bearerCredential(inHeader:))
    }

    /// The credential of an `Authorization` header value, if it is a bearer one.
    static func bearerCredential(inHeader header: String) -> String? {
        let scheme = "bearer ".utf8
        var credential = header.utf8[...]
        // `| 0x20` lowercases ASCII letters and leaves the space a space.
        guard credential.count > scheme.count, zip(credential, scheme).allSatisfy({ $0 | 0x20 == $1 }) else { return nil }
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        credential = credential.dropFirst(scheme.count).drop(while: isBlank)
        while let last = credential.last, isBlank(last) { credential = credential.dropLast() }
        return credential.isEmpty ? nil : String(Substring(credential))
    }
}

/// Authenticates every `/v1` request and stores the caller in the context; refuses (403) a
/// browser's request from an origin the caller's tenant does not allow, before any handler
/// runs (`CrossOriginMiddleware` shares the answers to the origins it allows).
struct AuthenticationMiddleware: RouterMiddleware {
    typealias Context = ReceiptsRequestContext
    let authenticator: Authenticator
    let origins: OriginPolicy
    /// Whether `?token=` is accepted too: only for the event stream, as EventSource cannot
    /// set headers.
    var acceptsTokenParameter = false

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let found = self.acceptsTokenParameter ? Authenticator.credential(of: request) : Authenticator.bearerCredential(of: request)
        guard let credential = found else {
            throw APIError.unauthorized("missing bearer credential")
        }
        var context = context
        let principal = try await self.authenticator.principal(for: credential)
        if let browser = context.browserOrigin, !browser.isAllowed {
            guard try await self.origins.allowedByTenant(browser.origin, tenant: principal.tenantId) else {
                throw OriginPolicy.refusal(of: browser.origin)
            }
            browser.allow()
        }
        context.principal = principal
        return try await next(request, context)
    }
}

/// Guards `/admin`: 404 while no admin token is configured, 401 for a wrong one.
struct AdminAuthenticationMiddleware: RouterMiddleware {
    typealias Context = ReceiptsRequestContext
    let adminToken: String?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let adminToken else { throw APIError.notFound() }
        guard let credential = Authenticator.bearerCredential(of: request),
            constantTimeEquals(Array(credential.utf8), Array(adminToken.utf8))
        else {
            throw APIError.unauthorized("missing or invalid admin token")
        }
        return try await next(request, context)
    }

    /// Compares without stopping at the first difference, so timing does not reveal a prefix.
    private func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return zip(lhs, rhs).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
