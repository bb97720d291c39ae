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

    func write(to json: inout JSONWriter) {
        json.raw(#"{"id":"#)
        json.string(self.id)
        json.raw(#","url":"#)
        json.string(self.url)
        json.raw(#","events":"#)
        json.strings(self.events)
        json.raw(#","secret":"#)
        json.string(self.secret)
        json.raw(#","createdAt":"#)
        json.timestamp(self.createdAt)
        json.raw("}")
    }
}

/// A webhook as `GET` shows it: `{"id","url","events","createdAt","delivery":{"lastEventId",
/// "pending","failures","lastError","lastAttemptAt","nextAttemptAt"}}`, never the secret.
/// `lastEventId` is the position delivery has reached (every event up to it acknowledged, or
/// not of a type the webhook takes): a stream resumed from it (`after`, `Last-Event-ID`)
/// carries what the webhook has still to deliver. It is named as in the event history it was
/// written in (`EventHistory.eventId(_:currentIn:)`; the number alone before the hub has
/// looked at the log).
struct WebhookResponse: JSONResponse {
    let webhook: WebhookRecord
    let history: EventHistory?

    func write(to json: inout JSONWriter) {
        json.raw(#"{"id":"#)
        json.string(self.webhook.id)
        json.raw(#","url":"#)
        json.string(self.webhook.url)
        json.raw(#","events":"#)
        json.strings(self.webhook.events)
        json.raw(#","createdAt":"#)
        json.timestamp(self.webhook.createdAt)
        json.raw(#","delivery":{"lastEventId":"#)
        json.string(self.history?.eventId(self.webhook.position, currentIn: self.webhook.positionHistory) ?? String(self.webhook.position))
        json.raw(#","pending":"#)
        json.integer(self.webhook.pending)
        json.raw(#","failures":"#)
        json.integer(self.webhook.failures)
        json.raw(#","lastError":"#)
        json.string(self.webhook.lastError)
        json.raw(#","lastAttemptAt":"#)
        json.timestamp(self.webhook.lastAttemptAt)
        json.raw(#","nextAttemptAt":"#)
        json.timestamp(self.webhook.nextAttemptAt)
        json.raw("}}")
    }
}

/// `GET /v1/webhooks`: `{"webhooks":[…]}`.
struct WebhookListResponse: JSONResponse {
    let webhooks: [WebhookRecord]
    let history: EventHistory?

    func write(to json: inout JSONWriter) {
        json.raw(#"{"webhooks":["#)
        for (index, webhook) in self.webhooks.enumerated() {
            if index > 0 { json.raw(",") }
            WebhookResponse(webhook: webhook, history: self.history).write(to: &json)
        }
        json.raw("]}")
    }

    var estimatedJSONBytes: Int { 64 + self.webhooks.count * 512 }
}
