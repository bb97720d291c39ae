import Hummingbird
import ReceiptsCore
import ReceiptsStore

/// `/v1/chats/{chatId}` and its members.
struct ChatController {
    let store: ReceiptsStore
    /// Where `GET` goes (a standby may serve it).
    let reads: ReplicaReads
    /// Woken after a chat is deleted, to purge its messages.
    var deletedChats: WorkSignal? = nil

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.put("chats/:chatId", use: self.put)
        group.get("chats/:chatId", use: self.get)
        group.delete("chats/:chatId", use: self.delete)
        group.post("chats/:chatId/members", use: self.join)
        group.delete("chats/:chatId/members/:userId", use: self.leave)
        group.put("chats/:chatId/members/:userId/settings", use: self.memberSettings)
    }

    /// Creates a chat (201), confirms an identical one (200), or refuses a different one (409).
    @Sendable func put(_ request: Request, context: ReceiptsRequestContext) async throws -> EditedResponse<ChatResponse> {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        try principal.requireTenantKey(for: "creating chats")
        let body = try await request.decode(as: PutChatRequest.self, context: context)
        guard let kind = ChatKind(rawValue: body.kind) else {
            throw APIError.invalidRequest("kind must be \"direct\" or \"group\"")
        }
        let members = try body.members.map { try Validation.id($0, field: "members") }
        guard Set(members).count == members.count else { throw APIError.invalidRequest("members must not repeat a user") }
        switch kind {
        case .direct where members.count != 2:
            throw APIError.invalidRequest("a direct chat has exactly 2 members")
        case .group where members.isEmpty || members.count > Validation.maximumMembers:
            throw APIError.invalidRequest("a group has 1-\(Validation.maximumMembers) members")
        default:
            break
        }
        for member in members { context.noteWrite(about: member) }
        let outcome = try await self.store.putChat(tenant: principal.tenantId, chat: chatId, kind: kind, members: members)
        if outcome == .conflict {
            throw APIError.conflict("the chat exists with another kind or other members")
        }
        let chat = try await self.requireChat(tenant: principal.tenantId, chat: chatId)
        return EditedResponse(status: outcome == .created ? .created : .ok, response: ChatResponse(chat))
    }

    /// The chat and its current members; a user token must be one of them. May come from a
    /// standby (`ReplicaReads`).
    @Sendable func get(_ request: Request, context: ReceiptsRequestContext) async throws -> SourcedResponse<ChatResponse> {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        let answer = try await self.reads.serve(context, about: principal.tokenUser) { store in
            try await store.chat(tenant: principal.tenantId, chat: chatId)
        }
        guard let chat = answer.value else { throw APIError.notFound("no such chat") }
        if let user = principal.tokenUser, !chat.members.contains(where: { $0.userId == user }) {
            throw APIError.forbidden("not a member of this chat")
        }
        return SourcedResponse(body: ChatResponse(chat), source: answer.source)
    }

    /// Deletes a chat with its members, messages and receipts (204; unknown: 404). Counts and
    /// lists drop it at once; the messages' rows go in the background (`ChatPurgeService`).
    @Sendable func delete(_ request: Request, context: ReceiptsRequestContext) async throws -> Response {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        try principal.requireTenantKey(for: "deleting chats")
        switch try await self.store.deleteChat(tenant: principal.tenantId, chat: chatId) {
        case .deleted:
            self.deletedChats?.signal()
            return Response(status: .noContent)
        case .chatNotFound: throw APIError.notFound("no such chat")
        }
    }

    /// Adds a member to a group (idempotent).
    @Sendable func join(_ request: Request, context: ReceiptsRequestContext) async throws -> ChatResponse {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        try principal.requireTenantKey(for: "adding members")
        let body = try await request.decode(as: UserRequest.self, context: context)
        let user = try Validation.id(body.userId, field: "userId")
        context.noteWrite(about: user)
        switch try await self.store.join(tenant: principal.tenantId, chat: chatId, user: user) {
        case .joined, .alreadyMember: break
        case .directChat: throw APIError.conflict("a direct chat cannot get new members")
        case .chatNotFound: throw APIError.notFound("no such chat")
        }
        return ChatResponse(try await self.requireChat(tenant: principal.tenantId, chat: chatId))
    }

    /// Ends a membership (idempotent: leaving again, or never having joined, changes nothing).
    /// A user token that is not a member gets 403, as for `GET`: the answer lists the members.
    @Sendable func leave(_ request: Request, context: ReceiptsRequestContext) async throws -> ChatResponse {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        let user = try Validation.pathId("userId", in: context)
        try principal.requireActing(as: user)
        context.noteWrite(about: user)
        switch try await self.store.leave(tenant: principal.tenantId, chat: chatId, user: user) {
        case .chatNotFound: throw APIError.notFound("no such chat")
        case .notMember where principal.tokenUser != nil: throw APIError.forbidden("not a member of this chat")
        case .left, .notMember: break
        }
        return ChatResponse(try await self.requireChat(tenant: principal.tenantId, chat: chatId))
    }

    /// A member's settings of the chat: `muted` keeps its unread messages out of their total
    /// and badge. The tenant key, or that user's token; not a member: 403.
    @Sendable func memberSettings(_ request: Request, context: ReceiptsRequestContext) async throws -> MemberSettingsResponse {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        let user = try Validation.pathId("userId", in: context)
        try principal.requireActing(as: user)
        let body = try await request.decode(as: MemberSettingsRequest.self, context: context)
        context.noteWrite(about: user)
        switch try await self.store.setChatMuted(tenant: principal.tenantId, chat: chatId, user: user, muted: body.muted) {
        case .set: return MemberSettingsResponse(chatId: chatId, userId: user, muted: body.muted)
        case .notMember: throw APIError.forbidden("\(user) is not a member of this chat")
        case .chatNotFound: throw APIError.notFound("no such chat")
        }
    }

    private func requireChat(tenant: String, chat: String) async throws -> ChatRecord {
        guard let record = try await self.store.chat(tenant: tenant, chat: chat) else {
            throw APIError.notFound("no such chat")
        }
        return record
    }
}
