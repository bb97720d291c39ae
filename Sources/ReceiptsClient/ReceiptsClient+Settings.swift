// The face, continued: the tenant's settings (docs/web-clients.md, "Allowed origins").

extension ReceiptsClient {
    /// The web origins the tenant's credentials may be used from in a browser (tenant key).
    public func allowedOrigins() async throws -> [String] {
        try await Self.call { try await generated.getTenantSettings() }.ok.body.json.allowedOrigins
    }

    /// Replaces the tenant's allowed web origins (tenant key): 0–50 entries,
    /// `scheme://host[:port]` or `scheme://*.domain[:port]`; returns them as stored
    /// (lowercased, without a default port). Every instance follows within about a second.
    @discardableResult
    public func setAllowedOrigins(_ origins: [String]) async throws -> [String] {
        try await Self.call {
            try await generated.putTenantSettings(body: .json(.init(allowedOrigins: origins)))
        }.ok.body.json.allowedOrigins
    }
}
