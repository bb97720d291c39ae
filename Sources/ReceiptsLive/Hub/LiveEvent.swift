import Foundation
import ReceiptsCore
import ReceiptsJSON
import ReceiptsStore

/// An event as streams send it: JSON encoded once, however many devices get it.
package struct LiveEvent: Sendable {
    /// Position in the stream (in the current event history).
    package let id: Int64
    /// The opaque string id clients see (`EventHistory.eventId(_:)`): the position, and after a
    /// failover the history it belongs to.
    package let eventId: String
    /// The transaction that wrote it (see `EventHub.Subscriber.committedBefore`).
    let transactionId: Int64
    /// Its `type` (for a webhook's filter).
    package let type: String
    /// Users whose devices may see it (the tenant key sees all).
    let audience: Set<String>
    /// Who acted (`StoredEvent.userId`): an erased user's events are dropped from memory.
    let userId: String?
    /// The JSON object of one WebSocket text frame or SSE `data:` line.
    package let json: String
    /// Whether `json` carries its user's unread totals (an `unread.changed` only).
    let hasTotals: Bool
    /// About how much memory the event takes while the hub keeps it (the JSON, and each
    /// audience member with a `Set` entry's and a `String`'s overhead): what the hub's byte
    /// budget for recent events counts.
    let estimatedBytes: Int

    /// An event to stream; `totals`, for an `unread.changed`, are its user's totals as the hub
    /// delivers it (`UnreadTotalsOfPage`).
    init(_ event: StoredEvent, history: EventHistory, totals: UnreadTotals? = nil) {
        self.id = event.id
        self.eventId = history.eventId(event.id)
        self.transactionId = event.transactionId
        self.type = event.type
        self.audience = Set(event.audience)
        self.userId = event.userId
        self.hasTotals = totals != nil
        // The members in the documented order (the server's `JSONResponse`): id, type, chatId, userId,
        // messageIds, at, then the type's own (`unreadCount`, `markedUnread`; then an
        // `unread.changed`'s user totals). Written by hand,
        // the one object that is: the type's own members are the stored `data` object's, spliced
        // in as PostgreSQL wrote them, which an `Encodable` could only do by parsing them first.
        var json = JSONWriter(capacity: 160 + event.messageIds.count * 24)
        json.raw(#"{"id":"#)
        json.string(self.eventId)
        json.raw(#","type":"#)
        json.string(event.type)
        // chat.deleted names no user, user.erased no chat and neither any message: the
        // contract's shapes carry only their own fields.
        if let chatId = event.chatId {
            json.raw(#","chatId":"#)
            json.string(chatId)
        }
        if let userId = event.userId {
            json.raw(#","userId":"#)
            json.string(userId)
        }
        if event.chatId != nil && event.userId != nil {
            json.raw(#","messageIds":"#)
            json.strings(event.messageIds)
        }
        json.raw(#","at":"#)
        json.timestamp(event.occurredAt)
        json.members(of: event.data)
        if let totals {
            json.raw(#","total":"#)
            json.integer(totals.total)
            json.raw(#","badge":"#)
            json.string(UnreadBadge.text(for: totals.total))
            json.raw(#","totalMentions":"#)
            json.integer(totals.mentions)
            json.raw(#","mentionsBadge":"#)
            json.string(UnreadBadge.text(for: totals.mentions))
        }
        json.raw("}")
        self.json = json.text
        self.estimatedBytes = 144 + self.json.utf8.count + self.audience.reduce(0) { $0 + 48 + $1.utf8.count }
    }

    /// Whether `principal` may see the event: the tenant key sees all, a user what names them.
    func isVisible(to principal: Principal) -> Bool {
        guard let user = principal.tokenUser else { return true }
        return self.audience.contains(user)
    }

    /// `{"id":"<current>","type":"resync.required"}`: the asked-for position is unknown or
    /// expired, or of a history the database lost (a failover); the client should reload
    /// state and continue from the current id.
    static func resyncRequired(currentId: String) -> String {
        #"{"id":"\#(currentId)","type":"resync.required"}"#
    }
}
