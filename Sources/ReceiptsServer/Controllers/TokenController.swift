import Foundation
import Hummingbird
import ReceiptsCore

/// `POST /v1/tokens`: short-lived tokens for end-user devices.
struct TokenController {
    static let defaultTTL = 3600
    static let ttlRange = 1...86_400

    let userTokens: UserTokens

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.post("tokens", use: self.mint)
    }

    @Sendable func mint(_ request: Request, context: ReceiptsRequestContext) async throws -> EditedResponse<TokenResponse> {
        let principal = try context.requirePrincipal()
        try principal.requireTenantKey(for: "minting tokens")
        let body = try await request.decode(as: TokenRequest.self, context: context)
        let user = try Validation.id(body.userId, field: "userId")
        let ttl = body.ttlSeconds ?? Self.defaultTTL
        guard Self.ttlRange.contains(ttl) else {
            throw APIError.invalidRequest("ttlSeconds must be between 1 and 86400")
        }
        let (token, expiresAt) = try await self.userTokens.mint(tenant: principal.tenantId, user: user, ttl: ttl)
        return EditedResponse(status: .created, response: TokenResponse(token: token, expiresAt: expiresAt))
    }
}
