import Foundation
import HTTPTypes
import NIOCore
import Testing

/// Request bodies: the 1 MiB limit however the body is framed, nothing read before
/// authentication, repeated JSON keys refused.
@Suite("Request bodies")
struct RequestBodyTests {
    @Test("a chunked body over 1 MiB is 413 payload_too_large, as a plain one is; under it, chunked works")
    func chunkedTooLarge() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])

            let connection = try await RawConnection.open(port: client.port)
            defer { connection.close() }
            let head = "POST /v1/chats/g/messages HTTP/1.1\r\nHost: receipts\r\nAuthorization: Bearer \(tenant.apiKey)\r\n"
                + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            let fine = #"{"senderId":"a","text":"chunked"}"#
            try await connection.send(head + Self.chunked([String(fine.prefix(10)), String(fine.dropFirst(10))]))
            let accepted = try await connection.answer()
            #expect(accepted?.status == 201, "\(accepted?.body ?? connection.pendingText)")

            // 17 chunks of 64 KiB: 1 MiB + 64 KiB, as JSON that would otherwise be valid.
            let text = String(repeating: "y", count: 17 * 65536 - 40)
            let json = #"{"senderId":"a","text":"\#(text)"}"#
            let chunks = stride(from: 0, to: json.utf8.count, by: 65536).map { start in
                String(decoding: Array(json.utf8)[start..<min(start + 65536, json.utf8.count)], as: UTF8.self)
            }
            let large = try await RawConnection.open(port: client.port)
            defer { large.close() }
            try await large.send(head + Self.chunked(chunks))
            let refused = try await large.answer(within: .seconds(10))
            #expect(refused?.status == 413, "\(refused?.body ?? large.pendingText)")
            #expect(refused?.errorCode == "payload_too_large")

            // Nothing was sent by it.
            #expect(try await tenant.messages(in: "g", viewer: "a").map(\.text) == ["chunked"])
        }
    }

    @Test("a body declared as something other than JSON is 415 unsupported_media_type and changes nothing; JSON types and no type are read")
    func notJSON() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let json = #"{"id":"m-1","senderId":"a","text":"hi"}"#
            for type in ["text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml"] {
                let refused = try await client.request(.post, "/v1/chats/g/messages", as: tenant.apiKey, body: json, headers: [.contentType: type])
                #expect(refused.status == .unsupportedMediaType, "\(type): \(refused.body)")
                #expect(refused.errorCode == "unsupported_media_type")
                #expect(refused.body.contains("application/json"))
            }
            let form = try await client.request(
                .post, "/v1/chats/g/read", as: tenant.apiKey, body: "userId=b", headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(form.status == .unsupportedMediaType)
            #expect(try await tenant.messages(in: "g", viewer: "a").isEmpty)

            let withCharset = try await client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey, body: json, headers: [.contentType: "Application/JSON; charset=UTF-8"])
            #expect(withCharset.status == .created, "\(withCharset.body)")
            let structured = try await client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey, body: json, headers: [.contentType: "application/vnd.receipts+json"])
            #expect(structured.status == .ok, "\(structured.body)")
            let connection = try await RawConnection.open(port: client.port)
            defer { connection.close() }
            let untyped = #"{"id":"m-2","senderId":"a","text":"no type"}"#
            try await connection.send(
                "POST /v1/chats/g/messages HTTP/1.1\r\nHost: receipts\r\nAuthorization: Bearer \(tenant.apiKey)\r\n"
                    + "Content-Length: \(untyped.utf8.count)\r\n\r\n\(untyped)")
            let answer = try await connection.answer()
            #expect(answer?.status == 201, "\(answer?.body ?? connection.pendingText)")
            #expect(try await tenant.messages(in: "g", viewer: "a").map(\.text) == ["hi", "no type"])
        }
    }

    @Test("an unauthenticated request with a 1 MiB body gets 401 before the body is sent")
    func unauthenticatedBodyIsNotRead() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            for credential in ["", "Authorization: Bearer rk_wrong\r\n"] {
                let connection = try await RawConnection.open(port: client.port)
                defer { connection.close() }
                // The head only: the 1 MiB it announces never comes.
                try await connection.send(
                    "POST /v1/chats/g/messages HTTP/1.1\r\nHost: receipts\r\n\(credential)Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n"
                )
                let answer = try await connection.answer(within: .seconds(3))
                #expect(answer?.status == 401, "\(credential): \(connection.pendingText)")
                #expect(answer?.errorCode == "unauthorized")
                // The body was not waited for, so the connection does not stay for it either.
                #expect(answer?.header("connection")?.lowercased() == "close")
                #expect(try await connection.waitUntilClosed(within: .seconds(5)))
            }
            // A small body is dropped after the early answer and the connection kept: the next
            // request on it is served.
            let connection = try await RawConnection.open(port: client.port)
            defer { connection.close() }
            let body = #"{"senderId":"a","text":"x"}"#
            try await connection.send(
                "POST /v1/chats/g/messages HTTP/1.1\r\nHost: receipts\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
            )
            let early = try await connection.answer()
            #expect(early?.status == 401)
            #expect(early?.header("connection") == nil)
            try await connection.send(body + "GET /healthz HTTP/1.1\r\nHost: receipts\r\n\r\n")
            #expect(try await connection.answer()?.status == 200)
            #expect(try await tenant.messages(in: "g", viewer: "a").isEmpty)
        }
    }

    @Test("a JSON body naming a key twice is 400 invalid_request and changes nothing")
    func duplicateKeys() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let id = try await tenant.send(in: "g", from: "a")
            let cases: [(String, HTTPRequest.Method, String, String)] = [
                ("repeated userId", .post, "/v1/chats/g/read", #"{"userId":"a","userId":"b"}"#),
                ("repeated, escaped", .post, "/v1/chats/g/read", #"{"userId":"a","user\u0049d":"b"}"#),
                ("repeated, spaced", .post, "/v1/chats/g/read", "{ \"userId\" : \"b\" ,\n \"messageIds\": [\"\(id)\"], \"userId\": \"b\" }"),
                ("repeated text", .post, "/v1/chats/g/messages", #"{"senderId":"a","text":"one","text":"two"}"#),
                ("repeated members", .put, "/v1/chats/h", #"{"kind":"group","members":["a"],"members":["a","b"]}"#),
                ("repeated flag", .put, "/v1/users/b/settings", #"{"readReceipts":true,"readReceipts":false}"#),
                ("repeated in a token request", .post, "/v1/tokens", #"{"userId":"a","ttlSeconds":60,"userId":"b"}"#),
            ]
            for (name, method, path, body) in cases {
                let response = try await client.request(method, path, as: tenant.apiKey, body: body)
                #expect(response.status == .badRequest, "\(name): \(response.status) \(response.body)")
                #expect(response.errorCode == "invalid_request", "\(name)")
            }
            // The same key in different objects, and keys inside strings, are fine.
            let fine = try await client.request(
                .post, "/v1/chats/g/messages", as: tenant.apiKey, body: #"{"senderId":"a","text":"{\"text\":1,\"text\":2} \\\" text"}"#)
            #expect(fine.status == .created, "\(fine.body)")
            // Nothing changed.
            #expect(try await tenant.unread(for: "b").total == 2)
            #expect(try await client.request(.get, "/v1/chats/h", as: tenant.apiKey).status == .notFound)
            let list = try await client.request(.get, "/v1/chats/g/messages?viewer=a", as: tenant.apiKey)
            #expect((list.json["messages"] as? [[String: Any]])?.count == 2)
        }
    }

    /// `parts` in chunked transfer coding, with the final empty chunk.
    static func chunked(_ parts: [String]) -> String {
        parts.map { "\(String($0.utf8.count, radix: 16))\r\n\($0)\r\n" }.joined() + "0\r\n\r\n"
    }
}
