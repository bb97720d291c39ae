import Crypto
import Foundation

/// The `Receipts-Signature` header: `t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret,
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
}
