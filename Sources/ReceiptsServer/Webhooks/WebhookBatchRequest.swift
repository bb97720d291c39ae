import NIOHTTP1
import ReceiptsJSON
import ReceiptsStore

/// A batch as its receiver gets it: `{"webhookId":"…","events":[…]}` (the events as the
/// stream carries them), and the headers that sign it, ours and Standard Webhooks'.
struct WebhookBatchRequest {
    let body: [UInt8]
    let headers: HTTPHeaders
    /// Its Standard Webhooks id (`webhook-id`): the same for every attempt at the same events
    /// in the same replay.
    let id: String

    /// `entries` is not empty. During a secret's rotation overlap, the batch is signed with
    /// the secret it replaced too.
    init(webhook: String, entries: [WebhookDelivery.Entry], settings: WebhookAttemptSettings, replay generation: Int, timestamp: Int64) {
        self.body = Self.body(webhook: webhook, entries: entries)
        let (first, last) = (entries[0], entries[entries.count - 1])
        self.id = WebhookSignature.standardId(
            webhook: webhook, firstEventId: first.eventId, lastEventId: last.eventId,
            startsWithResync: first.type == WebhookEventTypes.resyncRequired, replay: generation)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "User-Agent", value: "receiptsd")
        headers.add(name: "Receipts-Webhook-Id", value: webhook)
        headers.add(
            name: WebhookSignature.headerName, value: WebhookSignature.header(secret: settings.secret, timestamp: timestamp, body: self.body))
        let secrets = [settings.secret] + (settings.previousSecret.map { [$0] } ?? [])
        for (name, value) in WebhookSignature.standardHeaders(id: self.id, timestamp: timestamp, body: self.body, secrets: secrets) {
            headers.add(name: name, value: value)
        }
        self.headers = headers
    }

    private static func body(webhook: String, entries: [WebhookDelivery.Entry]) -> [UInt8] {
        var head = JSONWriter(capacity: 64)
        head.raw(#"{"webhookId":"#)
        head.string(webhook)
        head.raw(#","events":["#)
        var bytes = head.bytes
        bytes.reserveCapacity(bytes.count + 2 + entries.reduce(0) { $0 + $1.json.utf8.count + 1 })
        for (index, entry) in entries.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: entry.json.utf8)
        }
        bytes.append(contentsOf: "]}".utf8)
        return bytes
    }
}
