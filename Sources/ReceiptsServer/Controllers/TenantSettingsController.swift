import Hummingbird
import ReceiptsCore
import ReceiptsStore

/// `/v1/settings`: a tenant's settings, for now the web origins its web client runs on
/// (`allowedOrigins`; docs/web-clients.md). Tenant key only: a user token cannot widen
/// where its own tenant's credentials may be used from.
struct TenantSettingsController {
    /// Most entries of `allowedOrigins`.
    static let maximumOrigins = 50

    let store: ReceiptsStore

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.get("settings", use: self.get)
        group.put("settings", use: self.put)
    }

    @Sendable func get(_ request: Request, context: ReceiptsRequestContext) async throws -> TenantSettingsResponse {
        let principal = try context.requirePrincipal()
        try principal.requireTenantKey(for: "reading the tenant's settings")
        guard let origins = try await self.store.allowedOrigins(tenant: principal.tenantId) else { throw APIError.unauthorized() }
        return TenantSettingsResponse(allowedOrigins: origins)
    }

    /// Replaces the allowed origins: each checked and written in one form (lowercased, a
    /// default port and a trailing `/` dropped), repeats dropped, order kept. Every instance
    /// follows within about a second.
    @Sendable func put(_ request: Request, context: ReceiptsRequestContext) async throws -> TenantSettingsResponse {
        let principal = try context.requirePrincipal()
        try principal.requireTenantKey(for: "changing the tenant's settings")
        let body = try await request.decode(as: TenantSettingsRequest.self, context: context)
        let origins = try Self.origins(body.allowedOrigins)
        guard let stored = try await self.store.setAllowedOrigins(tenant: principal.tenantId, origins: origins) else {
            throw APIError.unauthorized()
        }
        return TenantSettingsResponse(allowedOrigins: stored)
    }

    /// The entries in their one form; 400 for more than 50 or one that names no origin.
    static func origins(_ entries: [String]) throws -> [String] {
        guard entries.count <= Self.maximumOrigins else {
            throw APIError.invalidRequest("allowedOrigins holds at most \(Self.maximumOrigins) origins, not \(entries.count)")
        }
        var origins: [String] = []
        for entry in entries {
            let origin: String
            do {
                origin = try OriginPattern(parsing: entry).description
            } catch {
                throw APIError.invalidRequest("allowedOrigins: \(error.description)")
            }
            if !origins.contains(origin) { origins.append(origin) }
        }
        return origins
    }
}
