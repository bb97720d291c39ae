import Foundation
import Postgres

/// A webhook as the API shows it, with where its delivery stands.
public struct WebhookRecord: Sendable {
    public let id: String
    public let url: String
    public let events: [String]
    public let createdAt: Date
    /// Every event up to this id has been acknowledged (or is filtered out).
    public let position: Int64
    /// The event history `position` was written in (`EventHistory.position(_:currentIn:)`).
    public let positionHistory: String
    /// Events after `position` that the filter takes (at most 100,000 counted).
    public let pending: Int64
    public let failures: Int
    public let lastError: String?
    public let lastAttemptAt: Date?
    public let nextAttemptAt: Date?
    /// The receiver answered 410 Gone (`lastError` says so): nothing is delivered until a
    /// `PUT` enables it again.
    public let disabled: Bool
}

/// One attempt at a webhook batch, as its log keeps it (`receipts.webhook_attempts`).
public struct WebhookAttempt: Sendable {
    /// The batch's `webhook-id`.
    public let messageId: String
    public let firstEventId: String
    public let lastEventId: String
    public let events: Int
    public let attemptedAt: Date
    /// The receiver's status; nil when no answer came.
    public let status: Int?
    public let durationMilliseconds: Int
    /// Why it failed (nil when acknowledged), at most 256 characters kept.
    public let error: String?

    public init(
        messageId: String, firstEventId: String, lastEventId: String, events: Int, attemptedAt: Date, status: Int?,
        durationMilliseconds: Int, error: String?
    ) {
        self.messageId = messageId
        self.firstEventId = firstEventId
        self.lastEventId = lastEventId
        self.events = events
        self.attemptedAt = attemptedAt
        self.status = status
        self.durationMilliseconds = durationMilliseconds
        self.error = error
    }
}

/// What a replay did (`ReceiptsStore.replayWebhook`).
public enum ReplayWebhookOutcome: String, Sendable {
    case replayed
    /// The tenant has no such webhook.
    case notFound = "not_found"
    /// Retention deleted the tenant's events up to there.
    case pruned
    /// No event of the tenant has that id.
    case unknownEvent = "unknown_event"
    /// The database went on to another event history (a failover the hub has not followed).
    case historyChanged = "history"
}

/// What creating or replacing a webhook did.
public enum PutWebhookOutcome: Sendable, Equatable {
    case created(Date)
    case replaced(Date)
    /// The tenant has the most webhooks it may have already.
    case limitReached
    /// The database is no longer in the event history of the position given (a failover that
    /// the event hub has not followed yet): nothing was written; try again.
    case historyChanged
}

/// What an attempt at a webhook uses, read as it starts (`ReceiptsStore.beginWebhookAttempt`).
public struct WebhookAttemptSettings: Sendable {
    public let url: String
    public let events: [String]
    public let secret: String
    /// The secret a rotation replaced, while it still signs beside `secret` (its overlap).
    public let previousSecret: String?
    /// The acknowledged position in the database.
    public let position: Int64
    /// The event history `position` was written in.
    public let positionHistory: String
    /// Events whose transaction had finished in this snapshot predate the webhook.
    public let committedBefore: TransactionSnapshot
    /// Failed attempts at the current batch so far.
    public let failures: Int
    /// When the next attempt is due after a failure (a take-over honours it).
    public let nextAttemptAt: Date?
    /// False when an acknowledgement moved nothing because the database has gone on to
    /// another event history since the events were read (a failover).
    public let recorded: Bool
    /// How many times the webhook was replayed (`ReceiptsStore.replayWebhook`): a delivery
    /// begun at another generation starts again from the position in the database.
    public let replayGeneration: Int

    public init(
        url: String, events: [String], secret: String, previousSecret: String? = nil, position: Int64, positionHistory: String,
        committedBefore: TransactionSnapshot, failures: Int, nextAttemptAt: Date?, recorded: Bool = true, replayGeneration: Int = 0
    ) {
        self.url = url
        self.events = events
        self.secret = secret
        self.previousSecret = previousSecret
        self.position = position
        self.positionHistory = positionHistory
        self.recorded = recorded
        self.replayGeneration = replayGeneration
        self.committedBefore = committedBefore
        self.failures = failures
        self.nextAttemptAt = nextAttemptAt
    }
}

extension ReceiptsStore {
    /// Creates a webhook delivering the events committed from now on (`position`: the event
    /// hub's position in event history `history`, every event up to it committed before this
    /// call), or replaces the url, filter and secret of an existing one, keeping its position.
    public func putWebhook(
        tenant: String, webhook: String, url: String, events: [String], secret: String, position: Int64, history: String,
        maximumPerTenant: Int
    ) async throws -> PutWebhookOutcome {
        let row = try await self.query(
            "SELECT outcome, created_at FROM receipts.put_webhook(\(tenant), \(webhook), \(url), \(events), \(secret), \(position), \(history), \(Int32(maximumPerTenant)))"
        )[0]
        switch try row.decode((String, Date?).self) {
        case ("created", let createdAt?): return .created(createdAt)
        case ("replaced", let createdAt?): return .replaced(createdAt)
        case ("limit", _): return .limitReached
        case ("history", _): return .historyChanged
        case (let other, _): throw PostgresError(code: .invalidValue, message: "receipts.put_webhook returned \(other)")
        }
    }

    /// One webhook, or nil when the tenant has no such webhook.
    public func webhook(tenant: String, webhook: String) async throws -> WebhookRecord? {
        try await self.webhooks(tenant: tenant, only: webhook).first
    }

    /// Every webhook of the tenant, by id.
    public func webhooks(tenant: String) async throws -> [WebhookRecord] {
        try await self.webhooks(tenant: tenant, only: nil)
    }

    private func webhooks(tenant: String, only webhook: String?) async throws -> [WebhookRecord] {
        let rows = try await self.query(
            """
            SELECT webhook_id, url, events, created_at, delivered_through, position_history, pending, failures, last_error,
                   last_attempt_at, next_attempt_at, disabled
            FROM receipts.webhooks_of(\(tenant), \(webhook))
            """
        )
        return try rows.map { row in
            let (id, url, events, createdAt, position, positionHistory, pending, failures, lastError, lastAttemptAt, nextAttemptAt, disabled) =
                try row.decode((String, String, [String], Date, Int64, String, Int64, Int32, String?, Date?, Date?, Bool).self)
            return WebhookRecord(
                id: id, url: url, events: events, createdAt: createdAt, position: position, positionHistory: positionHistory,
                pending: pending, failures: Int(failures), lastError: lastError, lastAttemptAt: lastAttemptAt, nextAttemptAt: nextAttemptAt,
                disabled: disabled)
        }
    }

    /// Gives the webhook the new `secret`; the one it had goes on signing beside it for
    /// `overlap`. Returns when that ends; nil when the tenant has no such webhook.
    public func rotateWebhookSecret(tenant: String, webhook: String, secret: String, overlap: Duration) async throws -> Date? {
        try await self.query(
            "SELECT receipts.rotate_webhook_secret(\(tenant), \(webhook), \(secret), make_interval(secs => \(overlap.seconds)))"
        ).scalar(Date?.self)
    }

    /// Disables a webhook whose receiver answered 410 Gone (for the lease holder, which gives
    /// the lease up): no instance delivers it until a `PUT` enables it again.
    public func disableWebhook(_ key: WebhookKey, owner: String, error: String) async throws {
        _ = try await self.query("SELECT receipts.disable_webhook(\(key.tenant), \(key.webhook), \(owner), \(error))")
    }

    /// Adds an attempt to the webhook's log (the newest 100 are kept).
    public func recordWebhookAttempt(_ key: WebhookKey, _ attempt: WebhookAttempt) async throws {
        let status = attempt.status.map(Int32.init)
        let duration = Int32(clamping: attempt.durationMilliseconds)
        let events = Int32(attempt.events)
        _ = try await self.query(
            """
            SELECT receipts.record_webhook_attempt(\(key.tenant), \(key.webhook), \(attempt.messageId), \(attempt.firstEventId),
                                                   \(attempt.lastEventId), \(events), \(status), \(duration), \(attempt.error))
            """)
    }

    /// The webhook's newest attempts, newest first, at most `limit`.
    public func webhookAttempts(_ key: WebhookKey, limit: Int) async throws -> [WebhookAttempt] {
        let rows = try await self.query(
            """
            SELECT webhook_message_id, first_event_id, last_event_id, events, attempted_at, status, duration_ms, error
            FROM receipts.webhook_attempts_of(\(key.tenant), \(key.webhook), \(Int32(limit)))
            """)
        return try rows.map { row in
            let (messageId, first, last, events, attemptedAt, status, duration, error) =
                try row.decode((String, String, String, Int32, Date, Int32?, Int32, String?).self)
            return WebhookAttempt(
                messageId: messageId, firstEventId: first, lastEventId: last, events: Int(events), attemptedAt: attemptedAt,
                status: status.map(Int.init), durationMilliseconds: Int(duration), error: error)
        }
    }

    /// Deletes a webhook; false when there was none.
    public func deleteWebhook(tenant: String, webhook: String) async throws -> Bool {
        try await self.query("SELECT receipts.delete_webhook(\(tenant), \(webhook))").scalar(Bool.self)
    }

    /// Renews the leases `owner` holds, takes free and expired ones up to `maximum` held in
    /// all, and returns the webhooks it holds now, each with its replay generation.
    public func claimWebhooks(owner: String, lease: Duration, maximum: Int) async throws -> [WebhookKey: Int] {
        let rows = try await self.query(
            """
            SELECT tenant_id, webhook_id, replay_generation
            FROM receipts.claim_webhooks(\(owner), make_interval(secs => \(lease.seconds)), \(Int32(maximum)))
            """
        )
        var held: [WebhookKey: Int] = [:]
        for (tenant, webhook, generation) in try rows.decode((String, String, Int32).self) {
            held[WebhookKey(tenant: tenant, webhook: webhook)] = Int(generation)
        }
        return held
    }

    /// Replays the webhook from `position` of event history `history`: every event after it
    /// is delivered again, in order.
    public func replayWebhook(tenant: String, webhook: String, after position: Int64, history: String) async throws -> ReplayWebhookOutcome {
        try Self.outcome(
            ReplayWebhookOutcome.self,
            from: try await self.query("SELECT receipts.replay_webhook(\(tenant), \(webhook), \(position), \(history))"))
    }

    /// Gives back every lease `owner` holds, so that another instance takes over at once.
    public func releaseWebhooks(owner: String) async throws {
        _ = try await self.query("SELECT receipts.release_webhooks(\(owner))")
    }

    /// Renews `owner`'s lease on the webhook and reads what the next attempt uses; nil when
    /// the webhook is gone or another instance holds it.
    public func beginWebhookAttempt(_ key: WebhookKey, owner: String, lease: Duration) async throws -> WebhookAttemptSettings? {
        let rows = try await self.query(
            """
            SELECT url, events, secret, previous_secret, delivered_through, position_history, committed_before, failures, next_attempt_at,
                   recorded, replay_generation
            FROM receipts.begin_webhook_attempt(\(key.tenant), \(key.webhook), \(owner), make_interval(secs => \(lease.seconds)))
            """
        )
        return try rows.first.map { try WebhookAttemptSettings(row: $0, function: "begin_webhook_attempt") }
    }

    /// Moves the webhook's position to `position` of event history `history` (never back): a
    /// batch the receiver acknowledged (`delivered`), or events its filter skips; renews the
    /// lease and reads what the next attempt uses (`recorded` false, nothing moved, when the
    /// database has gone on to another history since). Nil when `owner` lost the lease or the
    /// webhook is gone: nothing moved. Nothing moves either (`recorded` false) when the webhook
    /// was replayed since the delivery began at `generation`.
    public func acknowledgeWebhookBatch(
        _ key: WebhookKey, owner: String, through position: Int64, history: String, delivered: Bool, lease: Duration, generation: Int
    ) async throws -> WebhookAttemptSettings? {
        let rows = try await self.query(
            """
            SELECT url, events, secret, previous_secret, delivered_through, position_history, committed_before, failures, next_attempt_at,
                   recorded, replay_generation
            FROM receipts.acknowledge_webhook_batch(\(key.tenant), \(key.webhook), \(owner), \(position), \(history), \(delivered),
                                                      make_interval(secs => \(lease.seconds)), \(Int32(generation)))
            """
        )
        return try rows.first.map { try WebhookAttemptSettings(row: $0, function: "acknowledge_webhook_batch") }
    }

    /// Records a failed attempt and when the next is due; the number of failures of the batch
    /// so far, or nil when `owner` lost the lease or the webhook is gone.
    public func recordWebhookFailure(_ key: WebhookKey, owner: String, error: String, retryAfter: Duration) async throws -> Int? {
        try await self.query(
            "SELECT receipts.record_webhook_failure(\(key.tenant), \(key.webhook), \(owner), \(error), make_interval(secs => \(retryAfter.seconds)))"
        ).scalar(Int32?.self).map(Int.init)
    }

    /// Events the webhook has still to deliver (at most 100,000 counted); nil when it is gone.
    public func webhookPending(_ key: WebhookKey) async throws -> Int64? {
        try await self.query("SELECT receipts.webhook_pending(\(key.tenant), \(key.webhook))").scalar(Int64?.self)
    }
}

extension WebhookAttemptSettings {
    /// Decodes `url, events, secret, delivered_through, position_history, committed_before, failures,
    /// next_attempt_at, recorded`.
    init(row: PostgresRow, function: String) throws {
        let (url, events, secret, previousSecret, position, positionHistory, committedBefore, failures, nextAttemptAt, recorded, generation) =
            try row.decode((String, [String], String, String?, Int64, String, String, Int32, Date?, Bool, Int32).self)
        guard let snapshot = TransactionSnapshot(committedBefore) else {
            throw PostgresError(code: .invalidValue, message: "receipts.\(function) returned no snapshot")
        }
        self.init(
            url: url, events: events, secret: secret, previousSecret: previousSecret, position: position, positionHistory: positionHistory,
            committedBefore: snapshot,
            failures: Int(failures), nextAttemptAt: nextAttemptAt, recorded: recorded, replayGeneration: Int(generation))
    }
}

/// A webhook's key: its tenant and id.
public struct WebhookKey: Sendable, Hashable, CustomStringConvertible {
    public let tenant: String
    public let webhook: String

    public init(tenant: String, webhook: String) {
        self.tenant = tenant
        self.webhook = webhook
    }

    public var description: String { "\(self.tenant)/\(self.webhook)" }
}

extension Duration {
    /// The duration in seconds, with its fraction (for `make_interval(secs => …)`).
    var seconds: Double {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
