import Foundation
import NIOCore
@testable import ReceiptsServer
import Testing

/// The pure parts of webhooks: the signature, the address check, the URL check, the backoff.
@Suite("Webhook parts")
struct WebhookPartsTests {
    @Test("the signature is t=<unix>,v1=<hex HMAC-SHA256(secret, \"<t>.<body>\")>, as openssl computes it")
    func signature() {
        let body = Array(#"{"webhookId":"w","events":[]}"#.utf8)
        // printf '%s' '1700000000.{"webhookId":"w","events":[]}' | openssl dgst -sha256 -hmac 'whsec-0123456789abcdef'
        #expect(
            WebhookSignature.header(secret: "whsec-0123456789abcdef", timestamp: 1_700_000_000, body: body)
                == "t=1700000000,v1=480944cfceb7b55a5cef852e370de1be8efe5e34571327ce79f9ef36f7c51180")
        #expect(WebhookSignature.hex([0x00, 0x0f, 0xa5, 0xff]) == "000fa5ff")
    }

    @Test("webhook-signature is v1,<base64 HMAC-SHA256(key, \"<id>.<t>.<body>\")>: the Standard Webhooks example, and a plain secret keyed by its bytes")
    func standardSignature() {
        // The example of the Standard Webhooks specification (the reference library signs it so).
        let headers = WebhookSignature.standardHeaders(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: Array(#"{"test": 2432232314}"#.utf8),
            secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])
        #expect(headers.map(\.name) == ["webhook-id", "webhook-timestamp", "webhook-signature"])
        #expect(headers.map(\.value) == ["msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="])
        // A secret not of the whsec_ form keys the HMAC with its UTF-8 bytes (the reference
        // library: Webhook(b"a plain secret of 24 chars").sign("m", 1614265330, "{}")).
        let plain = WebhookSignature.standardHeaders(id: "m", timestamp: 1_614_265_330, body: Array("{}".utf8), secrets: ["a plain secret of 24 chars"])
        #expect(plain.last?.value == "v1,o8DSLEXsF45tquqnUtUWcVbQg+42LJcY19azg1nH3Is=")
        // Two secrets (a rotation): both signatures, space-separated.
        let both = WebhookSignature.standardHeaders(
            id: "m", timestamp: 1_614_265_330, body: Array("{}".utf8), secrets: ["a plain secret of 24 chars", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])
        #expect(both.last?.value.split(separator: " ").count == 2)
        #expect(both.last?.value.hasPrefix("v1,o8DSLEXsF45tquqnUtUWcVbQg+42LJcY19azg1nH3Is= v1,") == true)
    }

    @Test("generated secrets are whsec_ and 32 random bytes; a whsec_ secret keys with its bytes (padded or not), any other with its UTF-8")
    func secrets() {
        let generated = WebhookSecret.generated()
        #expect(generated.hasPrefix("whsec_") && generated.count == 50)
        #expect(WebhookSecret.standardKey(of: generated).count == 32)
        #expect(WebhookSecret.generated() != generated)
        #expect(WebhookSecret.standardKey(of: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").count == 24)
        #expect(WebhookSecret.standardKey(of: String(generated.dropLast())) == WebhookSecret.standardKey(of: generated))
        // Not base64, or too short a key: the text itself.
        #expect(WebhookSecret.standardKey(of: "whsec_not base64 at all!") == Array("whsec_not base64 at all!".utf8))
        #expect(WebhookSecret.standardKey(of: "whsec_AAAA") == Array("whsec_AAAA".utf8))
        #expect(WebhookSecret.standardKey(of: "0123456789abcdef") == Array("0123456789abcdef".utf8))
        #expect(WebhookSignature.standardId(webhook: "w", firstEventId: "7", lastEventId: "9", startsWithResync: false) == "w_7_9")
        #expect(WebhookSignature.standardId(webhook: "w", firstEventId: "9", lastEventId: "9", startsWithResync: true) == "w_9_9_resync")
    }

    @Test("Retry-After: delay-seconds or an HTTP-date, at most an hour; anything else is no Retry-After")
    func retryAfter() {
        let now = Date(timeIntervalSince1970: 1_764_000_000)  // Mon, 24 Nov 2025 16:00:00 GMT
        #expect(WebhookSender.retryAfter("120", now: now) == .seconds(120))
        #expect(WebhookSender.retryAfter(" 0 ", now: now) == .zero)
        #expect(WebhookSender.retryAfter("86400", now: now) == .seconds(3600))
        #expect(WebhookSender.retryAfter("Mon, 24 Nov 2025 16:01:30 GMT", now: now) == .seconds(90))
        #expect(WebhookSender.retryAfter("Mon, 24 Nov 2025 15:00:00 GMT", now: now) == .zero)
        #expect(WebhookSender.retryAfter("Tue, 25 Nov 2025 16:00:00 GMT", now: now) == .seconds(3600))
        for bad in ["-5", "soon", "", "1.5"] {
            #expect(WebhookSender.retryAfter(bad, now: now) == nil, "\(bad)")
        }
    }

    @Test("loopback, private, link-local, multicast, unspecified and mapped forms of them are refused; public addresses pass")
    func addressPolicy() throws {
        let refused = [
            "127.0.0.1", "127.255.0.9", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254",
            "0.0.0.0", "100.64.0.1", "224.0.0.251", "239.255.255.250", "255.255.255.255", "::", "::1", "fe80::1", "fc00::1",
            "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "fec0::1",
        ]
        let allowed = ["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
        let policy = WebhookAddressPolicy(allowsPrivateNetworks: false)
        for text in refused {
            let address = try #require(WebhookAddressPolicy.literal(text), "\(text)")
            #expect(!policy.allows(address), "\(text)")
            #expect(WebhookAddressPolicy(allowsPrivateNetworks: true).allows(address), "\(text)")
        }
        for text in allowed {
            #expect(policy.allows(try #require(WebhookAddressPolicy.literal(text))), "\(text)")
        }
        #expect(WebhookAddressPolicy.literal("[::1]") != nil)
        #expect(WebhookAddressPolicy.literal("example.com") == nil)
    }

    @Test("a webhook URL is http or https with a host, at most 2048 characters")
    func target() {
        #expect(WebhookTarget("https://hooks.example.com/r?x=1")?.port == 443)
        #expect(WebhookTarget("HTTP://hooks.example.com:8080/r")?.port == 8080)
        #expect(WebhookTarget("http://[::1]:9/")?.host == "::1")
        for url in ["ftp://example.com/", "hooks.example.com", "http:///x", "http://example.com:0/", "mailto:a@example.com"] {
            #expect(WebhookTarget(url) == nil, "\(url)")
        }
        #expect(WebhookTarget("https://example.com/" + String(repeating: "a", count: 2029)) == nil)
        #expect(WebhookTarget("https://example.com/" + String(repeating: "a", count: 2028)) != nil)
    }

    @Test("backoff starts at the base, doubles, stops at the maximum, with jitter of ±20 %")
    func backoff() {
        let backoff = WebhookBackoff(base: .seconds(1), maximum: .seconds(300))
        #expect(backoff.delay(afterFailures: 1, jitter: 1) == .seconds(1))
        #expect(backoff.delay(afterFailures: 2, jitter: 1) == .seconds(2))
        #expect(backoff.delay(afterFailures: 9, jitter: 1) == .seconds(256))
        #expect(backoff.delay(afterFailures: 10, jitter: 1) == .seconds(300))
        #expect(backoff.delay(afterFailures: 1000, jitter: 1) == .seconds(300))
        for failures in 1...12 {
            let delay = backoff.delay(afterFailures: failures)
            let nominal = backoff.delay(afterFailures: failures, jitter: 1)
            #expect(delay >= nominal * 0.8 && delay <= min(nominal * 1.2, .seconds(300)))
        }
    }
}
