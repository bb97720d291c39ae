import Hummingbird
import ReceiptsCore
import ReceiptsStore

/// `/v1/users/{userId}`: unread counts and settings.
struct UserController {
    let store: ReceiptsStore
    let reads: ReplicaReads

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.get("users/:userId/unread", use: self.unread)
        group.put("users/:userId/settings", use: self.settings)
    }

    /// May come from a standby (`ReplicaReads`).
    @Sendable func unread(_ request: Request, context: ReceiptsRequestContext) async throws -> SourcedResponse<UnreadListResponse> {
        let principal = try context.requirePrincipal()
        let user = try Validation.pathId("userId", in: context)
        try principal.requireActing(as: user)
        let answer = try await self.reads.serve(context, about: user) { store in
            try await store.unreadChats(tenant: principal.tenantId, user: user)
        }
        return SourcedResponse(body: UnreadListResponse(answer.value), source: answer.source)
    }

    @Sendable func settings(_ request: Request, context: ReceiptsRequestContext) async throws -> SettingsResponse {
        let principal = try context.requirePrincipal()
        let user = try Validation.pathId("userId", in: context)
        try principal.requireActing(as: user)
        let body = try await request.decode(as: SettingsRequest.self, context: context)
        context.noteWrite(about: user)
        try await self.store.setReadReceipts(tenant: principal.tenantId, user: user, enabled: body.readReceipts)
        return SettingsResponse(userId: user, readReceipts: body.readReceipts)
    }
}
