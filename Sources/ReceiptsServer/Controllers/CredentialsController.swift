import Hummingbird
import Logging
import ReceiptsCore
import ReceiptsStore

/// Changing credentials (docs/api.md, "Deleting, erasing and credentials"): a tenant's API keys
/// and token secret (admin token), a user's tokens (tenant key).
///
/// Each change reaches every instance within about a second (`CredentialChanges`) and is
/// logged with who made it (the admin, or the tenant), never with a key.
struct CredentialsController {
    let store: ReceiptsStore
    let changes: CredentialChanges
    let logger: Logger

    /// `/admin/v1/tenants/{tenantId}/…`, behind the admin token.
    func addAdminRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.post("tenants/:tenantId/keys", use: self.addKey)
        group.get("tenants/:tenantId/keys", use: self.listKeys)
        group.delete("tenants/:tenantId/keys/:keyId", use: self.removeKey)
        group.post("tenants/:tenantId/token-secret/rotate", use: self.rotateSecret)
    }

    /// `/v1/users/{userId}/tokens/revoke`, with the tenant key.
    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.post("users/:userId/tokens/revoke", use: self.revokeTokens)
    }

    /// Adds an API key (201, shown once); the 11th is 409.
    @Sendable func addKey(_ request: Request, context: ReceiptsRequestContext) async throws -> EditedResponse<CreatedKeyResponse> {
        let tenant = try Validation.pathId("tenantId", in: context)
        let apiKey = APIKeys.generate()
        let keyId = APIKeys.generateId()
        switch try await self.store.addAPIKey(tenant: tenant, keyId: keyId, apiKeyHash: APIKeys.hash(apiKey)) {
        case .added(let createdAt):
            self.changes.changed(tenant: tenant)
            self.logger.info("API key added", metadata: ["receipts.tenant_id": "\(tenant)", "receipts.key_id": "\(keyId)", "receipts.by": "admin"])
            return EditedResponse(status: .created, response: CreatedKeyResponse(keyId: keyId, apiKey: apiKey, createdAt: createdAt))
        case .limitReached: throw APIError.conflict("a tenant has at most 10 API keys; remove one first")
        case .tenantNotFound: throw APIError.notFound("no such tenant")
        }
    }

    /// The tenant's keys: ids and times, never a key.
    @Sendable func listKeys(_ request: Request, context: ReceiptsRequestContext) async throws -> KeyListResponse {
        let tenant = try Validation.pathId("tenantId", in: context)
        guard let keys = try await self.store.apiKeys(tenant: tenant) else { throw APIError.notFound("no such tenant") }
        return KeyListResponse(keys)
    }

    /// Removes a key (204; the last one too: the tenant is locked out until one is added).
    @Sendable func removeKey(_ request: Request, context: ReceiptsRequestContext) async throws -> Response {
        let tenant = try Validation.pathId("tenantId", in: context)
        let keyId = try Validation.pathId("keyId", in: context)
        switch try await self.store.removeAPIKey(tenant: tenant, keyId: keyId) {
        case .removed:
            self.changes.changed(tenant: tenant)
            self.logger.info("API key removed", metadata: ["receipts.tenant_id": "\(tenant)", "receipts.key_id": "\(keyId)", "receipts.by": "admin"])
            return Response(status: .noContent)
        case .keyNotFound: throw APIError.notFound("no such key")
        case .tenantNotFound: throw APIError.notFound("no such tenant")
        }
    }

    /// Signs new tokens with a new secret; the previous one keeps verifying the tokens it
    /// signed, the one before it is retired at once.
    @Sendable func rotateSecret(_ request: Request, context: ReceiptsRequestContext) async throws -> RotatedSecretResponse {
        let tenant = try Validation.pathId("tenantId", in: context)
        guard let rotatedAt = try await self.store.rotateTokenSecret(tenant: tenant, secret: APIKeys.randomBytes(count: 32)) else {
            throw APIError.notFound("no such tenant")
        }
        self.changes.changed(tenant: tenant)
        self.logger.info("token secret rotated", metadata: ["receipts.tenant_id": "\(tenant)", "receipts.by": "admin"])
        return RotatedSecretResponse(rotatedAt: rotatedAt)
    }

    /// Revokes every token of the user issued up to now (tenant key).
    @Sendable func revokeTokens(_ request: Request, context: ReceiptsRequestContext) async throws -> RevokedTokensResponse {
        let principal = try context.requirePrincipal()
        let user = try Validation.pathId("userId", in: context)
        try principal.requireTenantKey(for: "revoking tokens")
        let revokedBefore = try await self.store.revokeTokens(tenant: principal.tenantId, user: user)
        self.changes.changed(tenant: principal.tenantId)
        self.logger.info(
            "user tokens revoked", metadata: ["receipts.tenant_id": "\(principal.tenantId)", "receipts.user_id": "\(user)", "receipts.by": "tenant"])
        return RevokedTokensResponse(userId: user, revokedBefore: revokedBefore)
    }
}
