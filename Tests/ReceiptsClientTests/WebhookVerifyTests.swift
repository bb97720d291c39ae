import Foundation
import ReceiptsClient
import Testing

/// `Webhook.verify` against a signature made elsewhere (Python's hmac, below), so the test
/// does not check the client against itself. The service's own signatures are checked by the
/// server's webhook tests with the same scheme.
@Suite("Webhook.verify")
struct WebhookVerifyTests {
    static let secret = "whsec_test_secret_0123456789abcdef"
    static let body = Data(#"{"webhookId":"w1","events":[]}"#.utf8)
    static let signedAt = Date(timeIntervalSince1970: 1_764_000_000)
    // python3: hmac.new(secret, b"1764000000." + body, hashlib.sha256).hexdigest()
    static let header = "t=1764000000,v1=1b24d3e3f50a4742df680a6ef8218e9ce64eb7edb6349c3903fd7621f2b935eb"

    @Test("a signature of the body with the secret, within the tolerance, is accepted")
    func accepts() throws {
        try Webhook.verify(body: Self.body, signatureHeader: Self.header, secret: Self.secret, now: Self.signedAt.addingTimeInterval(30))
        // Another scheme's part beside ours is ignored.
        try Webhook.verify(body: Self.body, signatureHeader: Self.header + ",v0=abc", secret: Self.secret, now: Self.signedAt)
    }

    @Test("a wrong secret, a changed body, an old signature and a malformed header are refused, each with its reason")
    func refuses() {
        #expect(throws: Webhook.VerificationError.signatureMismatch) {
            try Webhook.verify(body: Self.body, signatureHeader: Self.header, secret: "another secret of enough length", now: Self.signedAt)
        }
        #expect(throws: Webhook.VerificationError.signatureMismatch) {
            try Webhook.verify(body: Data(#"{"webhookId":"w2","events":[]}"#.utf8), signatureHeader: Self.header, secret: Self.secret, now: Self.signedAt)
        }
        #expect(throws: Webhook.VerificationError.outsideTolerance) {
            try Webhook.verify(body: Self.body, signatureHeader: Self.header, secret: Self.secret, now: Self.signedAt.addingTimeInterval(301))
        }
        for header in ["", "t=1764000000", "v1=00", "t=now,v1=00", "t=1764000000,v1=zz"] {
            #expect(throws: Webhook.VerificationError.malformedHeader, "\(header)") {
                try Webhook.verify(body: Self.body, signatureHeader: header, secret: Self.secret, now: Self.signedAt)
            }
        }
    }

    /// The example of the Standard Webhooks specification, which its reference library signs so.
    static let standardHeaders = [
        "Webhook-Id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "Webhook-Timestamp": "1614265330",
        "Webhook-Signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    ]
    static let standardSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    static let standardBody = Data(#"{"test": 2432232314}"#.utf8)
    static let standardSignedAt = Date(timeIntervalSince1970: 1_614_265_330)

    @Test("the Standard Webhooks headers: the specification's example is accepted, also beside another signature; refusals say why")
    func standardHeaders() throws {
        try Webhook.verify(body: Self.standardBody, headers: Self.standardHeaders, secret: Self.standardSecret, now: Self.standardSignedAt)
        var rotating = Self.standardHeaders
        rotating["Webhook-Signature"] = "v1,bm90IGl0 " + Self.standardHeaders["Webhook-Signature"]!
        try Webhook.verify(body: Self.standardBody, headers: rotating, secret: Self.standardSecret, now: Self.standardSignedAt)
        #expect(throws: Webhook.VerificationError.signatureMismatch) {
            try Webhook.verify(body: Self.standardBody, headers: Self.standardHeaders, secret: Self.secret, now: Self.standardSignedAt)
        }
        #expect(throws: Webhook.VerificationError.outsideTolerance) {
            try Webhook.verify(
                body: Self.standardBody, headers: Self.standardHeaders, secret: Self.standardSecret, now: Self.standardSignedAt.addingTimeInterval(301))
        }
        var missing = Self.standardHeaders
        missing["Webhook-Id"] = nil
        #expect(throws: Webhook.VerificationError.malformedHeader) {
            try Webhook.verify(body: Self.standardBody, headers: missing, secret: Self.standardSecret, now: Self.standardSignedAt)
        }
    }
}
