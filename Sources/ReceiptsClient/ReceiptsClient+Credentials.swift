import Foundation

// The face, continued: credentials (docs/api.md, "Deleting, erasing and credentials").

extension ReceiptsClient {
    public typealias CreatedAPIKey = Components.Schemas.CreatedApiKey
    public typealias APIKeyInfo = Components.Schemas.ApiKeyList.KeysPayloadPayload

    /// Adds an API key to a tenant (admin token); the key is shown only here. A tenant has
    /// 1–10 keys.
    public func addAPIKey(to tenantID: String) async throws -> CreatedAPIKey {
        let output = try await Self.call { try await generated.addApiKey(path: .init(tenantId: tenantID)) }
        guard case .created(let created) = output else { throw Self.unexpected(output, "addApiKey") }
        return try created.body.json
    }

    /// A tenant's API keys: ids and times, never a key (admin token).
    public func apiKeys(of tenantID: String) async throws -> [APIKeyInfo] {
        try await Self.call { try await generated.listApiKeys(path: .init(tenantId: tenantID)) }.ok.body.json.keys
    }

    /// Removes an API key (admin token): it stops working on every instance within a second.
    public func removeAPIKey(_ keyID: String, of tenantID: String) async throws {
        let output = try await Self.call { try await generated.removeApiKey(path: .init(tenantId: tenantID, keyId: keyID)) }
        guard case .noContent = output else { throw Self.unexpected(output, "removeApiKey") }
    }

    /// Signs the tenant's new user tokens with a new secret (admin token); returns when.
    @discardableResult
    public func rotateTokenSecret(of tenantID: String) async throws -> Date {
        try await Self.call { try await generated.rotateTokenSecret(path: .init(tenantId: tenantID)) }.ok.body.json.rotatedAt
    }

    /// Revokes every token of `userID` issued up to now (tenant key); returns that moment.
    @discardableResult
    public func revokeTokens(of userID: String) async throws -> Date {
        try await Self.call { try await generated.revokeTokens(path: .init(userId: userID)) }.ok.body.json.revokedBefore
    }
}
