import Crypto
import Foundation

/// Tenant API keys: random, shown once, stored only as a SHA-256 hash.
enum APIKeys {
    /// Prefix that tells an API key from a user token (a JWT) at a glance.
    static let prefix = "rk_"

    /// A new key: the prefix and 32 random bytes, base64url.
    static func generate() -> String {
        prefix + randomBytes(count: 32).base64URLEncoded
    }

    /// A new key's id, by which the admin API names it: `key_` and 12 random bytes,
    /// base64url (an id of the contract's alphabet).
    static func generateId() -> String {
        "key_" + randomBytes(count: 12).base64URLEncoded
    }

    static func hash(_ key: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(key.utf8)))
    }

    static func randomBytes(count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}

extension [UInt8] {
    var base64URLEncoded: String {
        Data(self).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
