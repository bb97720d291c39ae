import Foundation
import Hummingbird
import ReceiptsCore
import ReceiptsStore

/// `/v1/chats/{chatId}/messages`: sending and reading messages with their receipts.
struct MessageController {
    static let defaultLimit = 50
    static let limitRange = 1...1000

    let store: ReceiptsStore
    /// Where the pages and single messages go (a standby may serve them).
    let reads: ReplicaReads

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.post("chats/:chatId/messages", use: self.send)
        group.get("chats/:chatId/messages", use: self.list)
        group.get("chats/:chatId/messages/:messageId", use: self.show)
        group.patch("chats/:chatId/messages/:messageId", use: self.edit)
        group.delete("chats/:chatId/messages/:messageId", use: self.delete)
    }

    /// Deletes a message (204, also when it was deleted before; 404 when it never existed):
    /// the tenant key any, a user token only its own.
    @Sendable func delete(_ request: Request, context: ReceiptsRequestContext) async throws -> Response {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        let messageId = try Validation.pathId("messageId", in: context)
        switch try await self.store.deleteMessage(tenant: principal.tenantId, chat: chatId, id: messageId, sender: principal.tokenUser) {
        case .deleted, .alreadyDeleted: return Response(status: .noContent)
        case .notSender: throw APIError.forbidden("a user token deletes only its own messages")
        case .messageNotFound: throw APIError.notFound("no such message")
        case .chatNotFound: throw APIError.notFound("no such chat")
        }
    }

    /// Sends a message: 201 new; 200 for a repeat of the same id and content; 409 for the same
    /// id with other content. `mentions` names users (members but the sender are kept),
    /// `mentionsAll` mentions every member.
    @Sendable func send(_ request: Request, context: ReceiptsRequestContext) async throws -> EditedResponse<MessageResponse> {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        let body = try await request.decode(as: SendMessageRequest.self, context: context)
        let sender = try Validation.id(body.senderId, field: "senderId")
        let id = try body.id.map { try Validation.id($0, field: "id") } ?? GeneratedID.message()
        try Self.validateText(body.text)
        guard body.mentions.count <= Validation.maximumMentions else {
            throw APIError.invalidRequest("mentions may name at most \(Validation.maximumMentions) users")
        }
        let mentions = try body.mentions.map { try Validation.id($0, field: "mentions") }
        let thread = try body.threadId.map { try Validation.id($0, field: "threadId") }
        try principal.requireActing(as: sender)
        context.noteWrite(about: sender)

        switch try await self.store.sendMessage(
            tenant: principal.tenantId, chat: chatId, id: id, sender: sender, text: body.text, mentions: mentions,
            mentionsAll: body.mentionsAll, thread: thread)
        {
        case .created(let message): return EditedResponse(status: .created, response: MessageResponse(message))
        case .existing(let message): return EditedResponse(status: .ok, response: MessageResponse(message))
        case .conflict: throw APIError.conflict("another message was sent with this id")
        case .senderNotMember: throw APIError.forbidden("the sender is not a member of this chat")
        case .chatNotFound: throw APIError.notFound("no such chat")
        case .threadNotFound: throw APIError.invalidRequest("threadId names no message of this chat")
        case .threadIsReply: throw APIError.invalidRequest("threadId names a reply: a thread's root is a message of the main timeline")
        }
    }

    /// Edits a message's text: 200 with the message as it is now (also when the text was the
    /// same: nothing changes then); the tenant key any message, a user token only its own.
    /// Receipts, counts and labels stay as they were.
    @Sendable func edit(_ request: Request, context: ReceiptsRequestContext) async throws -> MessageResponse {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        let messageId = try Validation.pathId("messageId", in: context)
        let body = try await request.decode(as: EditMessageRequest.self, context: context)
        try Self.validateText(body.text)
        switch try await self.store.editMessage(
            tenant: principal.tenantId, chat: chatId, id: messageId, editor: principal.tokenUser, text: body.text)
        {
        case .edited(let message), .unchanged(let message): return MessageResponse(message)
        case .notSender: throw APIError.forbidden("a user token edits only its own messages")
        case .messageNotFound: throw APIError.notFound("no such message")
        case .chatNotFound: throw APIError.notFound("no such chat")
        }
    }

    /// The rules on a message's text, for sending and editing alike.
    private static func validateText(_ text: String) throws {
        guard text.utf8.count <= Validation.maximumTextBytes else { throw APIError.invalidRequest("text is longer than 64 KiB") }
        guard !text.utf8.contains(0) else { throw APIError.invalidRequest("text must not contain NUL characters") }
    }

    /// A page of messages, oldest first, with `receipt` on the viewer's own: of the main
    /// timeline, or with `thread`, of that root's replies. May come from a standby.
    @Sendable func list(_ request: Request, context: ReceiptsRequestContext) async throws -> SourcedResponse<MessageListResponse> {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        let query = ViewQuery(request.uri.queryParameters)
        let viewer = try query.viewer(for: principal)
        let before = try query.string("before").map { try Validation.id($0, field: "before") }
        let limit = try query.integer("limit", in: Self.limitRange) ?? Self.defaultLimit
        let thread = try query.string("thread").map { try Validation.id($0, field: "thread") }
        let style = try query.labelStyle()
        let timeZone = try query.timeZone()

        let page: MessagePage
        let answer = try await self.reads.serve(context, about: viewer) { store in
            try await store.messages(tenant: principal.tenantId, chat: chatId, before: before, limit: limit, viewer: viewer, thread: thread)
        }
        switch answer.value {
        case .success(let found): page = found
        case .failure(.threadNotFound): throw APIError.notFound("thread names no root message of this chat")
        case .failure(.chatNotFound): throw APIError.notFound("no such chat")
        case .failure(.beforeNotFound): throw APIError.notFound("before names no message of this chat")
        }
        try Self.requireMember(viewer, of: page.roster)
        // The store tallied the receipts of the viewer's own messages as they arrived.
        let list = MessageListResponse(messages: page.messages.map { message in
            let receipt = page.tally(of: message)?.summary(
                style: style, isViewersMostRecent: message.id == page.viewersMostRecentMessageId, timeZone: timeZone)
            return MessageResponse(message, receipt: receipt)
        })
        return SourcedResponse(body: list, source: answer.source)
    }

    /// One message; its sender also gets `receipt` and per-recipient `recipients`. May come
    /// from a standby.
    @Sendable func show(_ request: Request, context: ReceiptsRequestContext) async throws -> SourcedResponse<MessageResponse> {
        let principal = try context.requirePrincipal()
        let chatId = try Validation.pathId("chatId", in: context)
        let messageId = try Validation.pathId("messageId", in: context)
        let query = ViewQuery(request.uri.queryParameters)
        let viewer = try query.viewer(for: principal)
        let style = try query.labelStyle()
        let timeZone = try query.timeZone()

        let answer = try await self.reads.serve(context, about: viewer) { store in
            try await store.message(tenant: principal.tenantId, chat: chatId, id: messageId, viewer: viewer)
        }
        guard let found = answer.value else { throw APIError.notFound("no such message") }
        try Self.requireMember(viewer, of: found.roster)
        guard let viewer, found.message.senderId == viewer else {
            return SourcedResponse(body: MessageResponse(found.message), source: answer.source)
        }
        let shown = MessageResponse(
            found.message,
            receipt: ReceiptRules.summary(
                of: found.receipts, in: found.roster, style: style,
                isViewersMostRecent: found.isViewersMostRecent, timeZone: timeZone
            ),
            recipients: ReceiptRules.recipientStatuses(of: found.receipts, in: found.roster)
        )
        return SourcedResponse(body: shown, source: answer.source)
    }

    private static func requireMember(_ viewer: String?, of roster: ChatRoster) throws {
        if let viewer, !roster.currentMembers.contains(viewer) {
            throw APIError.forbidden("\(viewer) is not a member of this chat")
        }
    }
}
