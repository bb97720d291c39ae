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
