import Postgres

extension ReceiptsStore {
    /// Registers a tenant. Only the hash of its API key is stored.
    ///
    /// - Returns: false when the id is taken.
    public func createTenant(id: String, name: String, apiKeyHash: [UInt8], tokenSecret: [UInt8]) async throws -> Bool {
        do {
            _ = try await self.query(
                "SELECT receipts.create_tenant(\(id), \(name), \(PostgresBytes(apiKeyHash)), \(PostgresBytes(tokenSecret)))"
            )
            self.credentials.record(tenant: id, apiKeyHash: apiKeyHash)
            return true
        } catch let error as PostgresError where error.isUniqueViolation {
            return false
        }
    }

    /// Replaces a tenant's API keys with one; false when there is no such tenant.
    public func replaceAPIKey(tenant: String, apiKeyHash: [UInt8]) async throws -> Bool {
        let replaced = try await self.query("SELECT receipts.replace_api_key(\(tenant), \(PostgresBytes(apiKeyHash)))").scalar(Bool.self)
        if replaced {
            self.credentials.record(tenant: tenant, apiKeyHash: apiKeyHash, replacingKeys: true)
            self.credentials.invalidate()
        }
        return replaced
    }

    /// The id of the tenant whose API key hashes to `apiKeyHash`.
    public func tenant(apiKeyHash: [UInt8]) async throws -> String? {
        try await self.query("SELECT receipts.tenant_for_api_key(\(PostgresBytes(apiKeyHash)))").scalar(String?.self)
    }

    /// The keys that verify `tenant`'s user tokens (the current generation's, which also signs
    /// new ones, and the previous one's until the next rotation); nil for an unknown tenant.
    public func tokenSecrets(tenant: String) async throws -> TokenSecrets? {
        let rows = try await self.query("SELECT generation, current_secret, previous_secret FROM receipts.tenant_token_secrets(\(tenant))")
        guard let (generation, current, previous) = try rows.first?.decode((Int, PostgresBytes, PostgresBytes?).self) else { return nil }
        return TokenSecrets(generation: generation, current: current.bytes, previous: previous?.bytes)
    }
}

/// A tenant's token-signing secrets.
public struct TokenSecrets: Sendable {
    /// The current secret's generation (0 before any rotation); the previous one is one less.
    public let generation: Int
    public let current: [UInt8]
    /// The secret of the generation before, while it still verifies the tokens it signed.
    public let previous: [UInt8]?
}
