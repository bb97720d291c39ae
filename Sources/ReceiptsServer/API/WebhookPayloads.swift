import Foundation
import Hummingbird
import ReceiptsStore

/// `PUT /v1/webhooks/{webhookId}` body: `{"url","events"?,"secret"?}`.
struct PutWebhookRequest: RequestBody {
    let url: String
    let events: [String]?
    let secret: String?

    enum CodingKeys: String, CodingKey, CaseIterable { case url, events, secret }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.url = try container.decode(String.self, forKey: .url)
        self.events = try container.decodeUnlessAbsent([String].self, forKey: .events)
        self.secret = try container.decodeUnlessAbsent(String.self, forKey: .secret)
    }
}

/// The answer to a `PUT`: `{"id","url","events","secret","createdAt"}`, the only answer that
/// carries the secret.
struct PutWebhookResponse: JSONResponse {
    let id: String
    let url: String
    let events: [String]
    let secret: String
    let createdAt: Date
}

/// `POST /v1/webhooks/{webhookId}/replay` body: `{"after":"<event id>"}`.
struct ReplayWebhookRequest: RequestBody {
    let after: String

    enum CodingKeys: String, CodingKey, CaseIterable { case after }
}

/// A webhook as `GET` shows it: `{"id","url","events","createdAt","disabled","delivery":{"lastEventId",
/// "pending","failures","lastError","lastAttemptAt","nextAttemptAt"}}`, never the secret.
/// `lastEventId` is the position delivery has reached (every event up to it acknowledged, or
/// not of a type the webhook takes): a stream resumed from it (`after`, `Last-Event-ID`)
/// carries what the webhook has still to deliver. It is named as in the event history it was
/// written in (`EventHistory.eventId(_:currentIn:)`; the number alone before the hub has
/// looked at the log).
struct WebhookResponse: JSONResponse {
    struct Delivery: Encodable {
        let lastEventId: String
        let pending: Int64
        let failures: Int
        let lastError: String?
        let lastAttemptAt: Date?
        let nextAttemptAt: Date?
    }

    let id: String
    let url: String
    let events: [String]
    let createdAt: Date
    /// The receiver answered 410 Gone (`delivery.lastError`): nothing goes out until a `PUT`.
    let disabled: Bool
    let delivery: Delivery

    init(_ webhook: WebhookRecord, history: EventHistory?) {
        self.id = webhook.id
        self.url = webhook.url
        self.events = webhook.events
        self.createdAt = webhook.createdAt
        self.disabled = webhook.disabled
        self.delivery = Delivery(
            lastEventId: history?.eventId(webhook.position, currentIn: webhook.positionHistory) ?? String(webhook.position),
            pending: webhook.pending, failures: webhook.failures, lastError: webhook.lastError,
            lastAttemptAt: webhook.lastAttemptAt, nextAttemptAt: webhook.nextAttemptAt)
    }
}

/// `GET /v1/webhooks`: `{"webhooks":[…]}`.
struct WebhookListResponse: JSONResponse {
    let webhooks: [WebhookResponse]

    init(_ webhooks: [WebhookRecord], history: EventHistory?) {
        self.webhooks = webhooks.map { WebhookResponse($0, history: history) }
    }

    var estimatedJSONBytes: Int { 64 + self.webhooks.count * 512 }
}

/// `POST /v1/webhooks/{webhookId}/secret/rotate`: `{"secret","previousExpiresAt"}`, the new
/// secret (shown here only) and when the one it replaced stops signing.
struct RotatedWebhookSecretResponse: JSONResponse {
    let secret: String
    let previousExpiresAt: Date
}

/// `GET /v1/webhooks/{webhookId}/attempts`: `{"attempts":[{"webhookMessageId","firstEventId",
/// "lastEventId","events","attemptedAt","status","durationMs","error"}]}`, newest first.
struct WebhookAttemptsResponse: JSONResponse {
    struct Attempt: Encodable {
        let webhookMessageId: String
        let firstEventId: String
        let lastEventId: String
        let events: Int
        let attemptedAt: Date
        /// Null when no answer came.
        let status: Int?
        let durationMs: Int
        let error: String?

        init(_ attempt: WebhookAttempt) {
            self.webhookMessageId = attempt.messageId
            self.firstEventId = attempt.firstEventId
            self.lastEventId = attempt.lastEventId
            self.events = attempt.events
            self.attemptedAt = attempt.attemptedAt
            self.status = attempt.status
            self.durationMs = attempt.durationMilliseconds
            self.error = attempt.error
        }
    }

    let attempts: [Attempt]

    var estimatedJSONBytes: Int { 32 + self.attempts.count * 400 }
}
