import Crypto
import Foundation

/// Checks the webhooks the service sends (docs/api.md, "Webhooks"): each POST carries
/// `Receipts-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`.
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
