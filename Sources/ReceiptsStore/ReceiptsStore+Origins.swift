import Postgres

/// A tenant's allowed web origins (`GET`/`PUT /v1/settings`; docs/web-clients.md). The
/// service checks browsers' requests against them through the `CredentialDirectory`, which
/// every instance reloads when they change (`receipts.set_allowed_origins` notifies).
extension ReceiptsStore {
    /// The tenant's allowed origins, as stored; nil for an unknown tenant.
    public func allowedOrigins(tenant: String) async throws -> [String]? {
        try await self.withTenant(tenant, readOnly: true) { connection in
            try await connection.query("SELECT allowed_origins FROM receipts.tenants WHERE tenant_id = \(tenant)")
                .first.map { try $0.decode([String].self, column: "allowed_origins") }
        }
    }

    /// Replaces the tenant's allowed origins (already validated: at most 50, in the form
    /// `OriginPattern` writes); returns them as stored, nil for an unknown tenant. This
    /// process's directory drops what it held at once, before the answer.
    public func setAllowedOrigins(tenant: String, origins: [String]) async throws -> [String]? {
        let stored = try await self.query("SELECT receipts.set_allowed_origins(\(tenant), \(origins)::text[])").scalar([String]?.self)
        if stored != nil { self.credentials.invalidate(tenant: tenant) }
        return stored
    }
}
