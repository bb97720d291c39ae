import Foundation

// The face: one call per thing a product spec asks for, each one generated operation.

extension ReceiptsClient {
    // MARK: Tenants and tokens

    /// Creates a tenant and returns it with its API key, shown only here (admin token).
    public func createTenant(named name: String) async throws -> Tenant {
        let output = try await Self.call { try await generated.createTenant(body: .json(.init(name: name))) }
        guard case .created(let created) = output else { throw Self.unexpected(output, "createTenant") }
        return try created.body.json
    }

    /// A short-lived token with which a device acts as `userID` only (tenant key).
    /// - Parameter ttl: the token's lifetime, 1 s to 24 h (whole seconds).
    public func userToken(for userID: String, ttl: Duration = .seconds(3600)) async throws -> Token {
        let seconds = Int(ttl.components.seconds)
        let output = try await Self.call { try await generated.createToken(body: .json(.init(userId: userID, ttlSeconds: seconds))) }
        guard case .created(let created) = output else { throw Self.unexpected(output, "createToken") }
        return try created.body.json
    }

    // MARK: Chats

    /// Creates the chat, or answers the existing one when its kind and members are the
    /// same (so it is safe to repeat); other members are `conflict`. A direct chat has
    /// exactly 2 members, a group 1–10,000.
    @discardableResult
    public func createChat(_ chatID: String, kind: ChatKind = .group, members: [String]) async throws -> Chat {
        let request: Components.Schemas.PutChatRequest =
            switch kind {
            case .direct: .direct(.init(kind: .direct, members: members))
            case .group: .group(.init(kind: .group, members: members))
            }
        let output = try await Self.call { try await generated.putChat(path: .init(chatId: chatID), body: .json(request)) }
        switch output {
        case .created(let created): return try created.body.json
        case .ok(let existing): return try existing.body.json
        default: throw Self.unexpected(output, "putChat")
        }
    }

    /// The chat with its current members.
    public func chat(_ chatID: String) async throws -> Chat {
        try await Self.call { try await generated.getChat(path: .init(chatId: chatID)) }.ok.body.json
    }

    /// Adds `userID` to a group chat (idempotent).
    @discardableResult
    public func addMember(_ userID: String, to chatID: String) async throws -> Chat {
        try await Self.call { try await generated.addMember(path: .init(chatId: chatID), body: .json(.init(userId: userID))) }.ok.body.json
    }

    /// Removes `userID` from the chat (idempotent).
    @discardableResult
    public func removeMember(_ userID: String, from chatID: String) async throws -> Chat {
        try await Self.call { try await generated.removeMember(path: .init(chatId: chatID, userId: userID)) }.ok.body.json
    }

    // MARK: Messages

    /// Sends a message from `senderID`, a member of the chat.
    ///
    /// `mentions` names the users it mentions (at most 100): the current members other
    /// than the sender are kept, each once, in the order given; others are ignored.
    /// `mentionsAll` mentions every current member but the sender. The answer's `mentions`
    /// lists whom it mentioned; their unread counts (`unreadCounts(for:)`) count it in
    /// `mentions`, muted chats included, until they read it.
    ///
    /// `threadID` makes it a reply in the thread of that root: a message of the same chat
    /// that is not itself a reply (else the service answers 400 `invalid_request` and sends
    /// nothing). A reply is unread like any other message; it is listed by
    /// `messages(in:thread:)`, not on the main timeline, and its root carries the thread's
    /// summary (`thread`: `replies`, `lastReplyAt`).
    ///
    /// The message always carries an id (a new UUID unless `id` is given), which makes the
    /// call idempotent: after a 503 or a lost connection it is repeated, and the service
    /// answers the first message instead of storing a second (as stored: a repeat's
    /// mentions change nothing).
    @discardableResult
    public func send(
        _ text: String, in chatID: String, from senderID: String, id: String? = nil, mentions: [String] = [],
        mentionsAll: Bool = false, threadID: String? = nil
    ) async throws -> Message {
        // Without mentions or a thread, the body is as before they existed: no `mentions`,
        // no `mentionsAll`, no `threadId`.
        let body = Components.Schemas.SendMessageRequest(
            id: id ?? UUID().uuidString.lowercased(), senderId: senderID, text: text, threadId: threadID,
            mentions: mentions.isEmpty ? nil : mentions, mentionsAll: mentionsAll ? true : nil)
        let output = try await RetryPolicy.$sendCarriesID.withValue(true) {
            try await Self.call { try await generated.sendMessage(path: .init(chatId: chatID), body: .json(body)) }
        }
        switch output {
        case .created(let created): return try created.body.json
        case .ok(let existing): return try existing.body.json
        default: throw Self.unexpected(output, "sendMessage")
        }
    }

    /// A page of the chat's messages, oldest first, as `viewer` sees them (with `receipt`
    /// on the viewer's own messages): the newest `limit`, or the `limit` before `before`.
    ///
    /// Without `thread`, the main timeline: replies are left out (a root carries its
    /// `thread` summary). With `thread`, a root's id, that thread's replies instead, paged
    /// the same way; a `thread` naming no message of the chat, or a reply, is
    /// `ReceiptsError` 404 `not_found`.
    public func messages(
        in chatID: String, viewer: String? = nil, before: String? = nil, limit: Int? = nil,
        labels: LabelStyle? = nil, timeZone: String? = nil, thread: String? = nil
    ) async throws -> [Message] {
        let query = Operations.ListMessages.Input.Query(
            viewer: viewer, before: before, limit: limit, thread: thread, labels: labels, tz: timeZone)
        return try await Self.call { try await generated.listMessages(path: .init(chatId: chatID), query: query) }.ok.body.json.messages
    }

    /// The message as `viewer` sees it; when the viewer is its sender it carries the
    /// `receipt` (state, counts, label in the `labels` style) and one `recipients` entry per
    /// recipient.
    public func receipt(of messageID: String, in chatID: String, viewer: String, labels: LabelStyle? = nil, timeZone: String? = nil) async throws -> Message {
        let query = Operations.GetMessage.Input.Query(viewer: viewer, labels: labels, tz: timeZone)
        return try await Self.call {
            try await generated.getMessage(path: .init(chatId: chatID, messageId: messageID), query: query)
        }.ok.body.json
    }

    /// Replaces the text of a message (tenant key: any message; user token: its own) and
    /// answers it with `editedAt` set. Its receipts, unread counts and labels stay as they
    /// were, and the chat gets `message.edited`. `text` follows the rules of sending (at
    /// most 64 KiB of UTF-8, no NUL).
    ///
    /// The same text again changes nothing (no event, `editedAt` unchanged), which makes
    /// the call safe to repeat after a 503 or a lost connection. A deleted message is
    /// `notFound`, another user's with a user token `forbidden`. After an edit, repeating
    /// the original `send` with its id is `conflict`: the service compares a repeat with
    /// the current text.
    @discardableResult
    public func editMessage(_ messageID: String, in chatID: String, text: String) async throws -> Message {
        try await Self.call {
            try await generated.editMessage(path: .init(chatId: chatID, messageId: messageID), body: .json(.init(text: text)))
        }.ok.body.json
    }

    // MARK: Marking

    /// Marks the listed messages (1–1,000) read by `userID`; reading implies delivery.
    /// Unknown ids and the user's own messages are skipped (they count 0 in `marked`).
    @discardableResult
    public func markMessagesAsRead(chatID: String, messageIDs: [String], by userID: String) async throws -> MarkReadResult {
        try await markRead(chatID, .MarkMessagesRequest(.init(userId: userID, messageIds: messageIDs)))
    }

    /// Marks every message of the chat read by `userID`, or `upTo` that message and every
    /// earlier one. `thread`: a root's id (that thread's replies only) or `"main"` (the main
    /// timeline only); nil, the whole chat.
    @discardableResult
    public func markChatAsRead(
        chatID: String, by userID: String, upTo messageID: String? = nil, thread: String? = nil
    ) async throws -> MarkReadResult {
        let request: Components.Schemas.MarkRequest =
            if let messageID {
                .MarkUpToRequest(.init(userId: userID, upTo: messageID, thread: thread))
            } else {
                .MarkAllRequest(.init(userId: userID, thread: thread))
            }
        return try await markRead(chatID, request)
    }

    private func markRead(_ chatID: String, _ request: Components.Schemas.MarkRequest) async throws -> MarkReadResult {
        try await Self.call { try await generated.markRead(path: .init(chatId: chatID), body: .json(request)) }.ok.body.json
    }

    /// Marks messages delivered to `userID`: the listed ones (1–1,000), or with `nil`
    /// every message of the chat (with `thread`, of that thread or, `"main"`, of the main
    /// timeline).
    @discardableResult
    public func markDelivered(
        chatID: String, messageIDs: [String]?, to userID: String, thread: String? = nil
    ) async throws -> MarkDeliveredResult {
        let request: Components.Schemas.MarkRequest =
            if let messageIDs {
                .MarkMessagesRequest(.init(userId: userID, messageIds: messageIDs))
            } else {
                .MarkAllRequest(.init(userId: userID, thread: thread))
            }
        return try await Self.call { try await generated.markDelivered(path: .init(chatId: chatID), body: .json(request)) }.ok.body.json
    }

    /// Marks the chat unread for `userID` only; answers its unread count (at least 1).
    @discardableResult
    public func markChatAsUnread(chatID: String, by userID: String) async throws -> Int {
        try await Self.call {
            try await generated.markUnread(path: .init(chatId: chatID), body: .json(.init(userId: userID)))
        }.ok.body.json.unreadCount
    }

    // MARK: Users

    /// The user's unread counts: the chats above 0 or marked unread, and their total (the
    /// chats the user muted are listed with `muted` but left out of `total` and `badge`),
    /// with the unread messages that mention the user per chat and in all (`mentions`,
    /// `mentionsBadge`; muted chats included).
    public func unreadCounts(for userID: String) async throws -> UnreadCounts {
        try await Self.call { try await generated.getUnread(path: .init(userId: userID)) }.ok.body.json
    }

    /// Whether the user's reads are shown to others (`false`: reads are never shown).
    @discardableResult
    public func setReadReceipts(_ enabled: Bool, for userID: String) async throws -> Settings {
        try await Self.call {
            try await generated.putSettings(path: .init(userId: userID), body: .json(.init(readReceipts: enabled)))
        }.ok.body.json
    }

    /// Mutes (or with `false` unmutes) the chat for `userID` alone, a current member: the
    /// chat stays in their `unreadCounts(for:)` with its count and `muted`, but out of their
    /// `total` and `badge`; its mentions still count. The setting stays through a leave and
    /// a rejoin. A user token may only mute for its own user; a user who is not a member is
    /// `forbidden`, an unknown chat `notFound`. Setting the same value again changes nothing.
    @discardableResult
    public func setMuted(_ muted: Bool, chat chatID: String, user userID: String) async throws -> MemberSettings {
        try await Self.call {
            try await generated.putMemberSettings(path: .init(chatId: chatID, userId: userID), body: .json(.init(muted: muted)))
        }.ok.body.json
    }
}
