import HTTPTypes
import ReceiptsStore

/// Decides which web origins may use a tenant's credentials from a browser
/// (docs/web-clients.md): those of the server's list (`RECEIPTS_ALLOWED_ORIGINS`), the service's own
/// origin (a page it serves, such as the demo), and the tenant's own `allowedOrigins`.
///
/// The tenants' lists are read from the `CredentialDirectory`, in memory: a browser request
/// costs no query of its own, and a change made on any instance holds everywhere within
/// about a second (it notifies like a change of credentials).
struct OriginPolicy: Sendable {
    let server: AllowedOrigins
    let directory: CredentialDirectory

    /// The `Origin` of a request made by a web page; nil for requests without one, and for the
    /// `ws://host` and `wss://host` that WebSocket client libraries (swift-websocket's among
    /// them) send: no web page has such an origin (a browser's WebSocket sends its page's), so
    /// those clients are treated as any backend is.
    static func browserOrigin(of headers: HTTPFields) -> String? {
        guard let origin = headers[.origin] else { return nil }
        let scheme = origin.prefix(while: { $0 != ":" }).lowercased()
        return scheme == "ws" || scheme == "wss" ? nil : origin
    }

    /// Whether `origin` is allowed whoever the caller: by the server's list, or as the
    /// service's own origin (`authority`: the `Host` the request reached it at).
    func allowsForEveryTenant(_ origin: String, authority: String?) -> Bool {
        let parsed = WebOrigin(header: origin)
        if self.server.allows(origin, parsed: parsed) { return true }
        guard let parsed, let authority else { return false }
        return parsed.isSameAuthority(as: authority)
    }

    /// Whether `origin` is allowed for the credentials of `tenant`: for every tenant, or by
    /// the tenant's own list.
    func allows(_ origin: String, authority: String?, tenant: String) async throws -> Bool {
        if self.allowsForEveryTenant(origin, authority: authority) { return true }
        return try await self.allowedByTenant(origin, tenant: tenant)
    }

    /// Whether the tenant's own list names `origin`.
    func allowedByTenant(_ origin: String, tenant: String) async throws -> Bool {
        guard let parsed = WebOrigin(header: origin) else { return false }
        let entries = try await self.directory.allowedOrigins(of: tenant)
        // Stored in the form `OriginPattern` writes, so they parse; an entry that somehow
        // does not (edited in psql) allows nothing.
        return entries.contains { (try? OriginPattern(parsing: $0))?.matches(parsed) == true }
    }

    /// The 403 of a request whose origin its credential's tenant does not allow.
    static func refusal(of origin: String) -> APIError {
        APIError.forbidden(
            "requests from the origin \(origin.prefix(OriginPattern.maximumLength)) are not allowed for this tenant (its allowedOrigins, PUT /v1/settings)")
    }
}
