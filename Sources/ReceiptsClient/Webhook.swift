import Crypto
import Foundation

/// Checks the webhooks the service sends (docs/api.md, "Webhooks"): each POST carries
/// `Receipts-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`, and
/// the Standard Webhooks headers `webhook-id`, `webhook-timestamp` and `webhook-signature:
/// v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<raw body>")>` (any Standard Webhooks
/// library checks those too).
public enum Webhook {
    /// Why a webhook request was refused.
    public enum VerificationError: Error, Sendable, Hashable {
        /// The header is not `t=…,v1=…`.
        case malformedHeader
        /// The signature's time is further than `tolerance` from now (a replay, or a clock
        /// far off).
        case outsideTolerance
        /// No `v1` signature matches the body and the secret.
        case signatureMismatch
    }

    /// Verifies that `body` (the raw bytes as received, before any JSON parsing) was signed
    /// by the service with `secret`, within `tolerance` of `now`. Throws
    /// `VerificationError` when it was not; answer such a request 400 and do not act on it.
    ///
    /// Every `v1=` of the header is tried, in constant time each.
    public static func verify(
        body: some DataProtocol,
        signatureHeader: String,
        secret: String,
        tolerance: Duration = .seconds(300),
        now: Date = Date()
    ) throws(VerificationError) {
        var timestamp: Int64?
        var signatures: [[UInt8]] = []
        // A header is short; more parts than this is not one of ours.
        let parts = signatureHeader.split(separator: ",", maxSplits: 16)
        for part in parts {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { throw .malformedHeader }
            switch pair[0] {
            case "t":
                guard let value = Int64(pair[1]) else { throw .malformedHeader }
                timestamp = value
            case "v1":
                guard let bytes = Self.bytes(hex: pair[1]) else { throw .malformedHeader }
                signatures.append(bytes)
            default:
                continue  // another scheme: ignored
            }
        }
        guard let timestamp, !signatures.isEmpty else { throw .malformedHeader }
        let seconds = Double(tolerance.components.seconds) + Double(tolerance.components.attoseconds) / 1e18
        guard abs(now.timeIntervalSince1970 - Double(timestamp)) <= seconds else { throw .outsideTolerance }

        var authenticator = HMAC<SHA256>(key: SymmetricKey(data: Data(secret.utf8)))
        authenticator.update(data: Data("\(timestamp).".utf8))
        authenticator.update(data: Data(body))
        let expected = authenticator.finalize()
        for signature in signatures where signature.count == SHA256.byteCount {
            // `==` of a MAC and bytes compares in constant time.
            if expected == Data(signature) { return }
        }
        throw .signatureMismatch
    }

    /// Verifies `body` (the raw bytes as received) by its Standard Webhooks headers, as the
    /// standard's libraries do: `headers` holds at least `webhook-id`, `webhook-timestamp` and
    /// `webhook-signature` (names in any case); the timestamp is within `tolerance` of `now`,
    /// and one `v1` signature of `"<id>.<timestamp>.<body>"` matches under `secret`'s key: the
    /// decoded bytes after `whsec_` (24–64 of them), else the secret's UTF-8 bytes. During a
    /// secret rotation the header carries a signature for each secret; either verifies.
    public static func verify(
        body: some DataProtocol,
        headers: [String: String],
        secret: String,
        tolerance: Duration = .seconds(300),
        now: Date = Date()
    ) throws(VerificationError) {
        var named: [String: String] = [:]
        for (name, value) in headers.prefix(256) { named[name.lowercased()] = value }
        guard let id = named["webhook-id"], let timestampText = named["webhook-timestamp"],
            let signatureHeader = named["webhook-signature"], let timestamp = Int64(timestampText)
        else { throw .malformedHeader }
        let seconds = Double(tolerance.components.seconds) + Double(tolerance.components.attoseconds) / 1e18
        guard abs(now.timeIntervalSince1970 - Double(timestamp)) <= seconds else { throw .outsideTolerance }

        var authenticator = HMAC<SHA256>(key: SymmetricKey(data: Self.standardKey(of: secret)))
        authenticator.update(data: Data("\(id).\(timestamp).".utf8))
        authenticator.update(data: Data(body))
        let expected = authenticator.finalize()
        var anySignature = false
        // A header is short; more signatures than this is not one of ours.
        for versioned in signatureHeader.split(separator: " ", maxSplits: 16) {
            let parts = versioned.split(separator: ",", maxSplits: 1)
            guard parts.count == 2, parts[0] == "v1" else { continue }  // another version: ignored
            guard let signature = Data(base64Encoded: String(parts[1])) else { throw .malformedHeader }
            anySignature = true
            if signature.count == SHA256.byteCount, expected == signature { return }
        }
        throw anySignature ? .signatureMismatch : .malformedHeader
    }

    /// The key of a Standard Webhooks signature for `secret`.
    private static func standardKey(of secret: String) -> Data {
        if secret.hasPrefix("whsec_") {
            var encoded = String(secret.dropFirst("whsec_".count))
            while encoded.utf8.count % 4 != 0 { encoded += "=" }
            if let bytes = Data(base64Encoded: encoded), (24...64).contains(bytes.count) { return bytes }
        }
        return Data(secret.utf8)
    }

    private static func bytes(hex: Substring) -> [UInt8]? {
        guard hex.count % 2 == 0, hex.count <= 128 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}
