import Foundation
import Postgres

/// One row of the event log.
public struct StoredEvent: Sendable {
    /// Position in the stream (ids are shared by all tenants; see `TransactionSnapshot`).
    public let id: Int64
    /// The transaction that wrote it, to compare with a `TransactionSnapshot`.
    public let transactionId: Int64
    public let tenantId: String
    public let type: String
    /// The chat it happened in; nil for `user.erased`.
    public let chatId: String?
    /// Who acted (see the column's comment); nil for `chat.deleted`.
    public let userId: String?
    public let messageIds: [String]
    /// Type-specific fields (e.g. `unreadCount`): the text of a JSON object.
    public let data: String
    /// Users whose devices may see the event; the tenant key sees all.
    public let audience: [String]
    public let occurredAt: Date
    /// The W3C traceparent of the traced batch that wrote it (`ReceiptsTracing`), when the
    /// read returns it (the hub's read of the log does); nil when untraced.
    public var traceParent: String? = nil

    public init(
        id: Int64, transactionId: Int64, tenantId: String, type: String, chatId: String?, userId: String?,
        messageIds: [String], data: String, audience: [String], occurredAt: Date
    ) {
        self.id = id
        self.transactionId = transactionId
        self.tenantId = tenantId
        self.type = type
        self.chatId = chatId
        self.userId = userId
        self.messageIds = messageIds
        self.data = data
        self.audience = audience
        self.occurredAt = occurredAt
    }
}

extension StoredEvent {
    /// The events in `rows`: the columns `event_id, transaction_id, tenant_id, type, chat_id,
    /// user_id, message_ids, data, audience, audience_version, occurred_at`, found by name,
    /// whatever else the result holds (a row whose `event_id` is null carries only those other
    /// columns).
    ///
    /// An event of a chat comes with its chat's audience version; the page gives that
    /// version's members once, on its first event of it, and null on the later ones
    /// (`receipts.page_audience`): they share the first one's array.
    static func all(in rows: PostgresRows) throws -> [StoredEvent] {
        guard !rows.isEmpty else { return [] }
        let columns = try Columns(of: rows)
        var events: [StoredEvent] = []
        events.reserveCapacity(rows.count)
        var audiences: [AudienceVersion: [String]] = [:]
        for row in rows where try row.decode(Int64?.self, column: columns.id) != nil {
            let tenantId = try row.decode(String.self, column: columns.tenantId)
            let chatId = try row.decode(String?.self, column: columns.chatId)
            let stored = try row.decode([String]?.self, column: columns.audience)
            let audience: [String]
            if let version = try row.decode(Int32?.self, column: columns.audienceVersion), let chatId {
                let key = AudienceVersion(tenantId: tenantId, chatId: chatId, version: version)
                if let stored { audiences[key] = stored }
                audience = audiences[key] ?? []
            } else {
                audience = stored ?? []
            }
            var event = StoredEvent(
                id: try row.decode(column: columns.id), transactionId: try row.decode(column: columns.transactionId),
                tenantId: tenantId, type: try row.decode(column: columns.type), chatId: chatId,
                userId: try row.decode(column: columns.userId), messageIds: try row.decode(column: columns.messageIds),
                data: try row.decode(PostgresJSON.self, column: columns.data).text, audience: audience,
                occurredAt: try row.decode(column: columns.occurredAt))
            if let column = columns.traceParent { event.traceParent = try row.decode(String?.self, column: column) }
            events.append(event)
        }
        return events
    }

    /// A chat's members at one of its audience versions (`receipts.chats.audience_version`).
    private struct AudienceVersion: Hashable {
        let tenantId: String
        let chatId: String
        let version: Int32
    }

    /// Where each field is in a result, looked up once per result.
    private struct Columns {
        let id, transactionId, tenantId, type, chatId, userId, messageIds, data, audience, audienceVersion, occurredAt: Int
        /// Only in the reads that return it.
        let traceParent: Int?

        init(of rows: PostgresRows) throws {
            func index(_ name: String) throws -> Int { try rows.columnIndex(named: name) }
            (self.id, self.transactionId, self.tenantId) = (try index("event_id"), try index("transaction_id"), try index("tenant_id"))
            (self.type, self.chatId, self.userId) = (try index("type"), try index("chat_id"), try index("user_id"))
            (self.messageIds, self.data) = (try index("message_ids"), try index("data"))
            (self.audience, self.audienceVersion) = (try index("audience"), try index("audience_version"))
            self.occurredAt = try index("occurred_at")
            self.traceParent = try? index("trace_parent")
        }
    }
}

/// A read of every tenant's new events, with the snapshot that decided what was visible.
public struct EventLogPage: Sendable {
    /// The event history the read was made in (`EventHistory`): the ids are of it.
    public let history: String
    public let snapshot: TransactionSnapshot
    /// Visible events after the asked-for position, in id order.
    public let events: [StoredEvent]

    public init(history: String, snapshot: TransactionSnapshot, events: [StoredEvent]) {
        self.history = history
        self.snapshot = snapshot
        self.events = events
    }

    /// The rows of `receipts.events_since`: always one, with
    /// the history and the snapshot, then the events' columns (null when there are none).
    init(_ rows: PostgresRows) throws {
        guard let first = rows.first, let snapshot = TransactionSnapshot(try first.decode(String.self, column: "snapshot")) else {
            throw PostgresError(code: .invalidValue, message: "receipts.events_since returned no snapshot")
        }
        self.init(history: try first.decode(column: "history_id"), snapshot: snapshot, events: try StoredEvent.all(in: rows))
    }
}

/// Where the event log stands, for a stream that is about to start.
public struct EventLogPosition: Sendable {
    /// The event history it was read in (`EventHistory`): its positions are of it.
    public let history: String
    /// The snapshot of the moment: what had committed by then.
    public let snapshot: TransactionSnapshot
    /// The newest event id handed out; a higher position is unknown.
    public let lastAllocated: Int64
    /// The newest id of the tenant's events that retention deleted; a lower position has
    /// lost events.
    public let prunedThrough: Int64

    /// Whether a client that saw everything up to `position` can be brought up to date: the
    /// position was handed out, and nothing of the tenant after it was deleted.
    public func canResume(after position: Int64) -> Bool {
        position >= self.prunedThrough && position <= self.lastAllocated
    }
}

/// The transactions that may still commit an event (`ReceiptsStore.eventWriters()`), read
/// right after a read of the log.
public struct EventWriters: Sendable {
    /// Their transaction ids (xid8), to compare with a `TransactionSnapshot`.
    public var transactions: Set<Int64>
    /// Their backends (none for a prepared transaction), for the log.
    public var pids: [Int32]
    /// A writer holds the lock but has no transaction id yet (a manual INSERT between its
    /// `nextval` and its row): ask again instead of waiting on what is known.
    public var hasWriterWithoutTransaction: Bool

    public init(transactions: Set<Int64>, pids: [Int32], hasWriterWithoutTransaction: Bool) {
        self.transactions = transactions
        self.pids = pids
        self.hasWriterWithoutTransaction = hasWriterWithoutTransaction
    }
}
