import Postgres

extension ReceiptsStore {
    /// Registers a tenant. Only the hash of its API key is stored.
    ///
    /// - Returns: false when the id is taken.
    public func createTenant(id: String, name: String, apiKeyHash: [UInt8], tokenSecret: [UInt8]) async throws -> Bool {
        do {
            _ = try await self.query(
                "SELECT receipts.create_tenant($1, $2, $3, $4)",
                [id, name, PostgresBytes(apiKeyHash), PostgresBytes(tokenSecret)]
            )
            self.credentials.record(tenant: id, apiKeyHash: apiKeyHash)
            return true
        } catch let error as PostgresError where error.isUniqueViolation {
            return false
        }
    }

    /// Replaces a tenant's API key; false when there is no such tenant.
    public func replaceAPIKey(tenant: String, apiKeyHash: [UInt8]) async throws -> Bool {
        let replaced = try await self.query("SELECT receipts.replace_api_key($1, $2)", [tenant, PostgresBytes(apiKeyHash)]).scalar(Bool.self)
        if replaced { self.credentials.record(tenant: tenant, apiKeyHash: apiKeyHash) }
        return replaced
    }

    /// The id of the tenant whose API key hashes to `apiKeyHash`.
    public func tenant(apiKeyHash: [UInt8]) async throws -> String? {
        try await self.query("SELECT receipts.tenant_for_api_key($1)", [PostgresBytes(apiKeyHash)]).scalar(String?.self)
    }

    /// The key that signs `tenant`'s user tokens, if the tenant exists.
    public func tokenSecret(tenant: String) async throws -> [UInt8]? {
        let rows = try await self.query("SELECT receipts.tenant_token_secret($1)", [tenant])
        return try rows.first?.decode(PostgresBytes?.self, column: 0)?.bytes
    }
}
