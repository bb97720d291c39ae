import Crypto
import Foundation

/// The signatures of a delivery: the Standard Webhooks headers (`webhook-id`,
/// `webhook-timestamp`, `webhook-signature`), which every Standard Webhooks verifier checks,
/// and the `Receipts-Signature` header: `t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret,
/// "<t>.<raw body>")>`, the scheme Stripe and others use, so that receivers already know how
/// to check it (and reject old timestamps against replays).
enum WebhookSignature {
    static let headerName = "Receipts-Signature"

    /// The header value for `body` sent at `timestamp` (unix seconds).
    static func header(secret: String, timestamp: Int64, body: [UInt8]) -> String {
        "t=\(timestamp),v1=\(self.hexDigest(secret: secret, timestamp: timestamp, body: body))"
    }

    /// The lowercase hex HMAC-SHA256 of `"<timestamp>.<body>"` under `secret` (its UTF-8 bytes).
    static func hexDigest(secret: String, timestamp: Int64, body: [UInt8]) -> String {
        var message = Array("\(timestamp).".utf8)
        message.append(contentsOf: body)
        return self.hex(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Array(secret.utf8))))
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `webhook-id`: names the batch, the same for every attempt of it and different for
    /// every other batch of any webhook: the webhook, then the ids of the batch's first and
    /// last events (ids name their event history, so a batch after a failover differs too),
    /// `_resync` for a batch that begins with `resync.required` (whose id is that of the last
    /// event the receiver may already have had alone), and `_r<n>` for a batch sent again by
    /// the webhook's n-th replay (a receiver that drops repeats by webhook-id takes it).
    static func standardId(webhook: String, firstEventId: String, lastEventId: String, startsWithResync: Bool, replay: Int = 0) -> String {
        "\(webhook)_\(firstEventId)_\(lastEventId)" + (startsWithResync ? "_resync" : "") + (replay > 0 ? "_r\(replay)" : "")
    }

    /// The three Standard Webhooks headers of `body`, sent at `timestamp` (unix seconds):
    /// `webhook-signature` is `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>` for each
    /// of `secrets` (`WebhookSecret.standardKey(of:)`), space-separated.
    static func standardHeaders(id: String, timestamp: Int64, body: [UInt8], secrets: [String]) -> [(name: String, value: String)] {
        var message = Array("\(id).\(timestamp).".utf8)
        message.append(contentsOf: body)
        let signatures = secrets.map { secret in
            let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: WebhookSecret.standardKey(of: secret)))
            return "v1," + Data(mac).base64EncodedString()
        }
        return [("webhook-id", id), ("webhook-timestamp", String(timestamp)), ("webhook-signature", signatures.joined(separator: " "))]
    }
}
