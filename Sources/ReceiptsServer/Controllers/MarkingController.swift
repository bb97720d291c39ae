import Hummingbird
import ReceiptsCore
import ReceiptsStore

/// `POST /v1/chats/{chatId}/read`, `…/delivered` and `…/unread`.
struct MarkingController {
    let store: ReceiptsStore

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.post("chats/:chatId/read", use: self.read)
        group.post("chats/:chatId/delivered", use: self.delivered)
        group.post("chats/:chatId/unread", use: self.unread)
    }

    @Sendable func read(_ request: Request, context: ReceiptsRequestContext) async throws -> MarkReadResponse {
        let (principal, chatId, user, target, scope) = try await self.markRequest(request, context: context)
        context.noteWrite(about: user)
        switch try await self.store.markRead(tenant: principal.tenantId, chat: chatId, user: user, target: target, scope: scope) {
        case .success(let result): return MarkReadResponse(marked: result.marked, unreadCount: result.unreadCount)
        case .failure(let failure): throw Self.apiError(for: failure, user: user)
        }
    }

    @Sendable func delivered(_ request: Request, context: ReceiptsRequestContext) async throws -> MarkDeliveredResponse {
        let (principal, chatId, user, target, scope) = try await self.markRequest(request, context: context)
        context.noteWrite(about: user)
        switch try await self.store.markDelivered(tenant: principal.tenantId, chat: chatId, user: user, target: target, scope: scope) {
        case .success(let marked): return MarkDeliveredResponse(marked: marked)
        case .failure(let failure): throw Self.apiError(for: failure, user: user)
        }
    }

    /// Marks the chat unread for the user only.
    @Sendable func unread(_ request: Request, context: ReceiptsRequestContext) async throws -> UnreadCountResponse {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        let body = try await request.decode(as: UserRequest.self, context: context)
        let user = try Validation.id(body.userId, field: "userId")
        try principal.requireActing(as: user)
        context.noteWrite(about: user)
        switch try await self.store.markUnread(tenant: principal.tenantId, chat: chatId, user: user) {
        case .success(let count): return UnreadCountResponse(unreadCount: count)
        case .failure(let failure): throw Self.apiError(for: failure, user: user)
        }
    }

    private func markRequest(
        _ request: Request,
        context: ReceiptsRequestContext
    ) async throws -> (Principal, String, String, MarkTarget, MarkScope) {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        let body = try await request.decode(as: MarkRequest.self, context: context)
        let user = try Validation.id(body.userId, field: "userId")
        let target = try body.target()
        let scope = try body.scope()
        try principal.requireActing(as: user)
        return (principal, chatId, user, target, scope)
    }

    static func apiError(for failure: MarkFailure, user: String) -> APIError {
        switch failure {
        case .chatNotFound: .notFound("no such chat")
        case .notMember: .forbidden("\(user) is not a member of this chat")
        case .messageNotFound: .notFound("upTo names no message of this chat")
        case .threadNotFound: .notFound("thread names no root message of this chat")
        }
    }
}
