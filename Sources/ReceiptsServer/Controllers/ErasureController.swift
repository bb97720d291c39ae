import Foundation
import Hummingbird
import Logging
import ReceiptsCore
import ReceiptsStore

/// Erasing users (tenant key) and tenants (admin token): docs/api.md, "Deleting, erasing and
/// credentials". The request does at once what must hold at once; the rest is the
/// `ErasureService`'s, which this wakes.
struct ErasureController {
    let store: ReceiptsStore
    let erasures: WorkSignal
    let changes: CredentialChanges
    let logger: Logger

    /// `/v1/users/{userId}` and its erasure, with the tenant key.
    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.delete("users/:userId", use: self.eraseUser)
        group.get("users/:userId/erasure", use: self.userErasure)
    }

    /// `/admin/v1/tenants/{tenantId}`, behind the admin token.
    func addAdminRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.delete("tenants/:tenantId", use: self.eraseTenant)
    }

    /// Erases a user (202); `?messages=delete` deletes the messages they sent too.
    @Sendable func eraseUser(_ request: Request, context: ReceiptsRequestContext) async throws -> EditedResponse<UserErasureResponse> {
        let principal = try context.requirePrincipal()
        let user = try Validation.pathId("userId", in: context)
        try principal.requireTenantKey(for: "erasing users")
        let deletingMessages: Bool
        switch request.uri.queryParameters.get("messages") {
        case nil: deletingMessages = false
        case "delete": deletingMessages = true
        default: throw APIError.invalidRequest("messages must be \"delete\" when given")
        }
        let status = try await self.store.requestUserErasure(tenant: principal.tenantId, user: user, deletingMessages: deletingMessages)
        self.changes.changed(tenant: principal.tenantId)
        self.erasures.signal()
        self.logger.info(
            "user erasure asked",
            metadata: ["receipts.tenant_id": "\(principal.tenantId)", "receipts.user_id": "\(user)", "receipts.by": "tenant"])
        return EditedResponse(status: .accepted, response: UserErasureResponse(userId: user, status: status, includesRequestedAt: false))
    }

    /// The user's latest erasure (404: none was asked).
    @Sendable func userErasure(_ request: Request, context: ReceiptsRequestContext) async throws -> UserErasureResponse {
        let principal = try context.requirePrincipal()
        let user = try Validation.pathId("userId", in: context)
        try principal.requireTenantKey(for: "erasures")
        guard let status = try await self.store.userErasure(tenant: principal.tenantId, user: user) else {
            throw APIError.notFound("no erasure of this user was asked")
        }
        return UserErasureResponse(userId: user, status: status, includesRequestedAt: true)
    }

    /// Erases a tenant (202): its keys and tokens stop at once.
    @Sendable func eraseTenant(_ request: Request, context: ReceiptsRequestContext) async throws -> EditedResponse<TenantErasureResponse> {
        let tenant = try Validation.pathId("tenantId", in: context)
        let outcome = try await self.store.requestTenantErasure(tenant: tenant)
        switch outcome {
        case .tenantNotFound: throw APIError.notFound("no such tenant")
        case .pending, .done: break
        }
        self.changes.changed(tenant: tenant)
        self.erasures.signal()
        self.logger.info("tenant erasure asked", metadata: ["receipts.tenant_id": "\(tenant)", "receipts.by": "admin"])
        return EditedResponse(status: .accepted, response: TenantErasureResponse(tenantId: tenant, done: outcome == .done))
    }
}

/// `{"userId","erasure":"pending"|"done"}`, with `requestedAt` for `GET …/erasure`.
struct UserErasureResponse: JSONResponse {
    let userId: String
    let status: ErasureStatus
    let includesRequestedAt: Bool

    enum CodingKeys: String, CodingKey { case userId, erasure, requestedAt }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.userId, forKey: .userId)
        try container.encode(self.status.done ? "done" : "pending", forKey: .erasure)
        if self.includesRequestedAt { try container.encode(self.status.requestedAt, forKey: .requestedAt) }
    }
}

/// `{"tenantId","erasure":"pending"|"done"}`.
struct TenantErasureResponse: JSONResponse {
    let tenantId: String
    /// `pending` or `done`.
    let erasure: String

    init(tenantId: String, done: Bool) {
        self.tenantId = tenantId
        self.erasure = done ? "done" : "pending"
    }
}
