import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import ReceiptsServer
import TestSupport
import Testing

/// CORS and allowed origins, as the contract has them (docs/web-clients.md), over HTTP:
/// the exact headers, the 403 that changes nothing, and the settings. `BrowserTests` checks
/// the same with a real browser.
@Suite("Browsers: allowed origins and CORS")
struct CrossOriginTests {
    static let webClient = "https://chat.example.com"
    /// What a page may read beyond the safelisted headers (docs/api.md, read-your-writes).
    static let exposedHeaders = "Receipts-Consistency-Token, Receipts-Read-Source"

    @Test("a preflight on any /v1 route answers 204 with the contract's headers, for any origin and without a credential")
    func preflight() async throws {
        try await TestService.run { api in
            for path in ["/v1/chats/c1/read", "/v1/events", "/v1/settings", "/v1/users/u1/unread"] {
                let response = try await api.request(
                    .options, path, as: nil,
                    headers: [
                        .origin: "https://anyone.example", .accessControlRequestMethod: "POST",
                        .accessControlRequestHeaders: "authorization,content-type,receipts-consistency-token",
                    ])
                #expect(response.status == .noContent, "\(path)")
                #expect(response.headers[.accessControlAllowOrigin] == "https://anyone.example")
                #expect(response.headers[.accessControlAllowMethods] == "GET, POST, PUT, PATCH, DELETE")
                #expect(response.headers[.accessControlAllowHeaders] == "Authorization, Content-Type, Last-Event-ID, Receipts-Consistency-Token")
                #expect(response.headers[.accessControlMaxAge] == "600")
                #expect(response.headers[.vary] == "Origin")
                #expect(response.headers[.accessControlAllowCredentials] == nil)
                #expect(response.body.isEmpty)
            }
        }
    }

    @Test("answers to an allowed origin carry Allow-Origin, Expose-Headers and Vary, errors included; without Origin nothing changes")
    func allowedOrigin() async throws {
        try await TestService.run { api in
            let tenant = try await api.createTenant()
            try await Self.setOrigins([Self.webClient], of: tenant)
            try await tenant.createChat("g", members: ["alice", "bob"])
            let token = try await tenant.token(for: "alice")

            let sent = try await api.request(
                .post, "/v1/chats/g/messages", as: token, body: #"{"senderId":"alice","text":"hi"}"#, headers: [.origin: Self.webClient])
            #expect(sent.status == .created)
            #expect(sent.headers[.accessControlAllowOrigin] == Self.webClient)
            #expect(sent.headers[.accessControlExposeHeaders] == Self.exposedHeaders)
            #expect(sent.headers[.vary] == "Origin")
            let unread = try await api.request(.get, "/v1/users/alice/unread", as: token, headers: [.origin: Self.webClient])
            #expect(unread.status == .ok)
            #expect(unread.headers[.accessControlExposeHeaders] == Self.exposedHeaders)
            let missing = try await api.request(.get, "/v1/chats/nope", as: token, headers: [.origin: Self.webClient])
            #expect(missing.status == .notFound)
            #expect(missing.headers[.accessControlAllowOrigin] == Self.webClient)
            #expect(missing.headers[.accessControlExposeHeaders] == Self.exposedHeaders)
            let forbidden = try await api.request(.get, "/v1/users/bob/unread", as: token, headers: [.origin: Self.webClient])
            #expect(forbidden.status == .forbidden)
            #expect(forbidden.headers[.accessControlAllowOrigin] == Self.webClient)
            #expect(forbidden.headers[.accessControlExposeHeaders] == Self.exposedHeaders)

            let plain = try await api.request(.get, "/v1/users/alice/unread", as: token)
            #expect(plain.status == .ok)
            #expect(plain.headers[.accessControlAllowOrigin] == nil)
            #expect(plain.headers[.accessControlExposeHeaders] == nil)
            #expect(plain.headers[.vary] == nil)
        }
    }

    @Test("a request from an origin the tenant does not allow is 403 forbidden and changes nothing; a 401 is shared with any origin")
    func refusedOrigin() async throws {
        try await TestService.run { api in
            let tenant = try await api.createTenant()
            try await Self.setOrigins([Self.webClient], of: tenant)
            try await tenant.createChat("g", members: ["alice", "bob"])
            let message = try await tenant.send(in: "g", from: "bob")
            let token = try await tenant.token(for: "alice")

            for origin in ["https://evil.example", "http://chat.example.com", "https://chat.example.com:8443", "null"] {
                let read = try await api.request(.post, "/v1/chats/g/read", as: token, body: #"{"userId":"alice"}"#, headers: [.origin: origin])
                #expect(read.status == .forbidden, "\(origin)")
                #expect(read.errorCode == "forbidden")
                #expect(read.headers[.accessControlAllowOrigin] == nil)
                #expect(read.headers[.accessControlExposeHeaders] == nil)
                let send = try await api.request(
                    .post, "/v1/chats/g/messages", as: tenant.apiKey, body: #"{"id":"x","senderId":"alice","text":"no"}"#, headers: [.origin: origin])
                #expect(send.status == .forbidden)
            }
            #expect(try await tenant.message(message, in: "g", viewer: "bob").readBy.isEmpty)
            #expect(try await tenant.messages(in: "g", viewer: "bob").map(\.id) == [message])

            let unauthorized = try await api.request(.get, "/v1/users/alice/unread", as: "not-a-token", headers: [.origin: "https://evil.example"])
            #expect(unauthorized.status == .unauthorized)
            #expect(unauthorized.headers[.accessControlAllowOrigin] == "https://evil.example")
            #expect(unauthorized.headers[.accessControlExposeHeaders] == Self.exposedHeaders)
            #expect(unauthorized.headers[.vary] == "Origin")
            let anonymous = try await api.request(.get, "/v1/events", as: nil, headers: [.origin: "https://evil.example"])
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous.headers[.accessControlAllowOrigin] == "https://evil.example")
        }
    }

    @Test("a WebSocket upgrade from a refused origin is 403 before the upgrade; from an allowed one it upgrades")
    func webSocketOrigin() async throws {
        try await TestService.run { api in
            let tenant = try await api.createTenant()
            try await Self.setOrigins(["https://*.example.com"], of: tenant)
            let token = try await tenant.token(for: "alice")
            let refused = try await RawUpgrade.open(port: api.port, path: "/v1/stream?token=\(token)", origin: "https://example.com")
            await refused.close()
            #expect(refused.status == 403)
            #expect(refused.errorCode == "forbidden")
            let allowed = try await RawUpgrade.open(port: api.port, path: "/v1/stream?token=\(token)", origin: "https://app.chat.example.com")
            await allowed.close()
            #expect(allowed.status == 101)
            let own = try await RawUpgrade.open(port: api.port, path: "/v1/stream?token=\(token)", origin: "http://127.0.0.1:\(api.port)")
            await own.close()
            #expect(own.status == 101, "the service's own origin (the demo page) is allowed")
            // WebSocket client libraries (not browsers) send `ws://host`: no page's origin.
            let library = try await RawUpgrade.open(port: api.port, path: "/v1/stream?token=\(token)", origin: "ws://127.0.0.1")
            await library.close()
            #expect(library.status == 101, "an Origin of scheme ws is a client library's, not a web page's")
        }
    }

    @Test("the event stream (SSE) answers an allowed origin with Allow-Origin and Expose-Headers")
    func eventStreamHeaders() async throws {
        try await TestService.run { api in
            let tenant = try await api.createTenant()
            try await Self.setOrigins([Self.webClient], of: tenant)
            let token = try await tenant.token(for: "alice")
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(api.port)/v1/events?token=\(token)")
            request.headers.add(name: "Origin", value: Self.webClient)
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            #expect(response.status == .ok)
            #expect(response.headers.first(name: "Content-Type") == "text/event-stream")
            #expect(response.headers.first(name: "Access-Control-Allow-Origin") == Self.webClient)
            #expect(response.headers.first(name: "Access-Control-Expose-Headers") == Self.exposedHeaders)
            #expect(response.headers.first(name: "Vary") == "Origin")
            var body = response.body.makeAsyncIterator()
            _ = try await body.next()  // the stream's opening comment; then leave
        }
    }

    @Test("the server's RECEIPTS_ALLOWED_ORIGINS allow for every tenant; * allows any origin")
    func serverOrigins() async throws {
        try await TestService.run(configure: { $0.allowedOrigins = try! AllowedOrigins(parsing: " https://app.example.org , http://localhost:3000/") }) { api in
            let tenant = try await api.createTenant()
            let token = try await tenant.token(for: "alice")
            for (origin, status) in [("https://APP.example.org", HTTPResponse.Status.ok), ("http://localhost:3000", .ok), ("http://localhost:3001", .forbidden)] {
                let response = try await api.request(.get, "/v1/users/alice/unread", as: token, headers: [.origin: origin])
                #expect(response.status == status, "\(origin)")
            }
            let health = try await api.request(.get, "/healthz", as: nil, headers: [.origin: "https://app.example.org"])
            #expect(health.headers[.accessControlAllowOrigin] == "https://app.example.org")
        }
        try await TestService.run(configure: { $0.allowedOrigins = try! AllowedOrigins(parsing: "*") }) { api in
            let tenant = try await api.createTenant()
            let response = try await api.request(.get, "/v1/users/alice/unread", as: tenant.apiKey, headers: [.origin: "https://whoever.example"])
            #expect(response.status == .ok)
            #expect(response.headers[.accessControlAllowOrigin] == "https://whoever.example")
        }
    }

    @Test("GET and PUT /v1/settings: the tenant key only, entries checked and written in one form, anything else 400 changing nothing")
    func settings() async throws {
        try await TestService.run { api in
            let tenant = try await api.createTenant()
            let initial = try await api.request(.get, "/v1/settings", as: tenant.apiKey)
            #expect(initial.status == .ok)
            #expect(initial.body == #"{"allowedOrigins":[]}"#)

            let put = try await api.request(
                .put, "/v1/settings", as: tenant.apiKey,
                json: ["allowedOrigins": ["HTTPS://Chat.Example.com/", "https://*.example.com", "http://localhost:3000", "https://chat.example.com:443", "capacitor://localhost"]])
            #expect(put.status == .ok, "\(put.body)")
            let expected = #"{"allowedOrigins":["https://chat.example.com","https://*.example.com","http://localhost:3000","capacitor://localhost"]}"#
            #expect(put.body == expected)
            #expect(try await api.request(.get, "/v1/settings", as: tenant.apiKey).body == expected)

            let bad: [String] = [
                #"{"allowedOrigins":["https://chat.example.com/app"]}"#, #"{"allowedOrigins":["https://chat.example.com?x=1"]}"#,
                #"{"allowedOrigins":["https://chat.example.com#top"]}"#, #"{"allowedOrigins":["*"]}"#, #"{"allowedOrigins":["chat.example.com"]}"#,
                #"{"allowedOrigins":["https://user@chat.example.com"]}"#, #"{"allowedOrigins":["https://chat.example.com:99999"]}"#,
                #"{"allowedOrigins":["https://"]}"#, #"{"allowedOrigins":["https://a..b"]}"#, #"{"allowedOrigins":[7]}"#, #"{"allowedOrigins":null}"#,
                #"{}"#, #"{"allowedOrigins":[],"other":1}"#, #"{"allowedOrigins":"https://chat.example.com"}"#,
                #"{"allowedOrigins":[\#((0...50).map { #""https://h\#($0).example.com""# }.joined(separator: ","))]}"#,
            ]
            for body in bad {
                let response = try await api.request(.put, "/v1/settings", as: tenant.apiKey, body: body)
                #expect(response.status == .badRequest, "\(body.prefix(80))")
                #expect(response.errorCode == "invalid_request")
            }
            #expect(try await api.request(.get, "/v1/settings", as: tenant.apiKey).body == expected)
            let fifty = (1...50).map { "https://h\($0).example.com" }
            #expect(try await api.request(.put, "/v1/settings", as: tenant.apiKey, json: ["allowedOrigins": fifty]).status == .ok)

            let token = try await tenant.token(for: "alice")
            #expect(try await api.request(.get, "/v1/settings", as: token).status == .forbidden)
            #expect(try await api.request(.put, "/v1/settings", as: token, json: ["allowedOrigins": []]).status == .forbidden)
            #expect(try await api.request(.get, "/v1/settings", as: nil).status == .unauthorized)
            // Another tenant's settings are its own.
            let other = try await api.createTenant()
            #expect(try await api.request(.get, "/v1/settings", as: other.apiKey).body == #"{"allowedOrigins":[]}"#)
        }
    }

    @Test("origins set on one instance hold on another within about a second")
    func otherInstance() async throws {
        try await TestService.run { first in
            try await TestService.run { second in
                let tenant = try await first.createTenant()
                let token = try await tenant.token(for: "alice")
                // The second instance has the tenant (and no origins) in memory.
                #expect(try await second.request(.get, "/v1/users/alice/unread", as: token, headers: [.origin: Self.webClient]).status == .forbidden)
                try await Self.setOrigins([Self.webClient], of: tenant)
                let deadline = ContinuousClock.now + .seconds(3)
                var status = HTTPResponse.Status.forbidden
                while status != .ok, ContinuousClock.now < deadline {
                    status = try await second.request(.get, "/v1/users/alice/unread", as: token, headers: [.origin: Self.webClient]).status
                    if status != .ok { try await Task.sleep(for: .milliseconds(50)) }
                }
                #expect(status == .ok)
            }
        }
    }

    static func setOrigins(_ origins: [String], of tenant: TestTenant) async throws {
        let response = try await tenant.client.request(.put, "/v1/settings", as: tenant.apiKey, json: ["allowedOrigins": origins])
        try #require(response.status == .ok, "\(response.body)")
    }
}

@Suite("Origins: parsing and matching")
struct OriginPatternTests {
    @Test("entries: one form, default ports dropped, wildcards only as a leading label")
    func parsing() throws {
        #expect(try OriginPattern(parsing: "HTTPS://Chat.Example.COM/").description == "https://chat.example.com")
        #expect(try OriginPattern(parsing: "http://localhost:80").description == "http://localhost")
        #expect(try OriginPattern(parsing: "http://127.0.0.1:8080").description == "http://127.0.0.1:8080")
        #expect(try OriginPattern(parsing: "https://[::1]:8443").description == "https://[::1]:8443")
        #expect(try OriginPattern(parsing: "https://*.example.com").description == "https://*.example.com")
        for bad in ["", "*", "https://", "https:///", "https://a/b", "https://a//", "https://a?", "https://a#", "https://*", "https://a.*.com",
            "https://a:0", "https://a:65536", "https://a:", "https://u:p@a", "1http://a", "https://a b", "https://a_b.c:x"]
        {
            #expect(throws: OriginPattern.Invalid.self, "\(bad)") { try OriginPattern(parsing: bad) }
        }
    }

    @Test("matching: scheme, host and port; a wildcard takes subdomains, not the domain itself")
    func matching() throws {
        let wildcard = try OriginPattern(parsing: "https://*.example.com")
        #expect(wildcard.matches(try #require(WebOrigin(header: "https://a.example.com"))))
        #expect(wildcard.matches(try #require(WebOrigin(header: "https://a.b.example.com"))))
        #expect(!wildcard.matches(try #require(WebOrigin(header: "https://example.com"))))
        #expect(!wildcard.matches(try #require(WebOrigin(header: "https://badexample.com"))))
        #expect(!wildcard.matches(try #require(WebOrigin(header: "http://a.example.com"))))
        #expect(!wildcard.matches(try #require(WebOrigin(header: "https://a.example.com:8443"))))
        let exact = try OriginPattern(parsing: "https://chat.example.com:443")
        #expect(exact.matches(try #require(WebOrigin(header: "https://chat.example.com"))))
        #expect(WebOrigin(header: "null") == nil)
        #expect(WebOrigin(header: "https://chat.example.com/") == nil, "a browser's Origin has no path")
        #expect(try #require(WebOrigin(header: "http://127.0.0.1:8080")).isSameAuthority(as: "127.0.0.1:8080"))
        #expect(try #require(WebOrigin(header: "https://receipts.example.com")).isSameAuthority(as: "Receipts.example.com"))
        #expect(!(try #require(WebOrigin(header: "http://127.0.0.1:8081")).isSameAuthority(as: "127.0.0.1:8080")))
    }

    @Test("RECEIPTS_ALLOWED_ORIGINS: comma-separated, blanks ignored, * for any")
    func serverList() throws {
        let list = try AllowedOrigins(parsing: " https://a.example , http://localhost:3000 ,")
        #expect(list.patterns.map(\.description) == ["https://a.example", "http://localhost:3000"])
        #expect(!list.allowsAny)
        #expect(try AllowedOrigins(parsing: "*").allowsAny)
        #expect(throws: OriginPattern.Invalid.self) { try AllowedOrigins(parsing: "https://a.example/path") }
    }
}
