import Foundation

/// A webhook's secret and the HMAC key it stands for.
///
/// Generated secrets have the Standard Webhooks form, `whsec_<base64 of 32 random bytes>`,
/// and key the `webhook-signature` HMAC with those bytes, as every Standard Webhooks verifier
/// decodes them. A secret a tenant gave in that form (24–64 bytes) is used the same way; any
/// other given secret keys it with its UTF-8 bytes. `Receipts-Signature` keys its HMAC with
/// the secret's UTF-8 bytes, whatever its form, as it always did.
enum WebhookSecret {
    static let standardPrefix = "whsec_"
    /// How many decoded bytes a `whsec_` secret may have.
    static let standardKeyBytes = 24...64

    /// The key of `webhook-signature` for `secret`.
    static func standardKey(of secret: String) -> [UInt8] {
        if secret.hasPrefix(Self.standardPrefix) {
            var encoded = String(secret.dropFirst(Self.standardPrefix.count))
            // Verifiers accept it without padding; so does this.
            while encoded.utf8.count % 4 != 0 { encoded += "=" }
            if let bytes = Data(base64Encoded: encoded), Self.standardKeyBytes.contains(bytes.count) {
                return Array(bytes)
            }
        }
        return Array(secret.utf8)
    }

    /// A new secret: `whsec_` and 32 random bytes from the system's generator, base64 (50
    /// characters).
    static func generated() -> String {
        var random = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
        return Self.standardPrefix + Data(bytes).base64EncodedString()
    }
}
