import Foundation
import HTTPTypes
import Testing

@Suite("Bad input")
struct BadInputTests {
    @Test("every bad request is a 4xx in the contract's shape and changes nothing")
    func badRequests() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let id = try await tenant.send(in: "g", from: "a")
            let longId = String(repeating: "x", count: 129)
            let tooManyIds = (0...1000).map { "m\($0)" }
            let bigText = String(repeating: "é", count: 32 * 1024 + 1)  // 65,538 bytes

            let cases: [(String, HTTPMethodName, String, String, HTTPResponse.Status, String)] = [
                ("bad JSON", .post, "/v1/chats/g/read", #"{"userId": "b""#, .badRequest, "invalid_request"),
                ("not an object", .post, "/v1/chats/g/read", #"["b"]"#, .badRequest, "invalid_request"),
                ("wrong type", .post, "/v1/chats/g/read", #"{"userId": 7}"#, .badRequest, "invalid_request"),
                ("ids of wrong type", .post, "/v1/chats/g/read", #"{"userId":"b","messageIds":"\#(id)"}"#, .badRequest, "invalid_request"),
                ("missing userId", .post, "/v1/chats/g/read", #"{}"#, .badRequest, "invalid_request"),
                ("bad user id", .post, "/v1/chats/g/read", #"{"userId":"b c"}"#, .badRequest, "invalid_request"),
                ("id over 128", .post, "/v1/chats/g/read", #"{"userId":"\#(longId)"}"#, .badRequest, "invalid_request"),
                ("bad message id", .post, "/v1/chats/g/read", #"{"userId":"b","messageIds":["ok","no/slash"]}"#, .badRequest, "invalid_request"),
                ("empty id list", .post, "/v1/chats/g/read", #"{"userId":"b","messageIds":[]}"#, .badRequest, "invalid_request"),
                ("over 1000 ids", .post, "/v1/chats/g/read", try json(["userId": "b", "messageIds": tooManyIds]), .badRequest, "invalid_request"),
                ("ids and upTo", .post, "/v1/chats/g/read", #"{"userId":"b","messageIds":["\#(id)"],"upTo":"\#(id)"}"#, .badRequest, "invalid_request"),
                ("delivered: ids and upTo", .post, "/v1/chats/g/delivered", #"{"userId":"b","messageIds":["\#(id)"],"upTo":"\#(id)"}"#, .badRequest, "invalid_request"),
                ("bad chat id in path", .post, "/v1/chats/bad%20id/read", #"{"userId":"b"}"#, .badRequest, "invalid_request"),
                ("unknown kind", .put, "/v1/chats/new", #"{"kind":"channel","members":["a","b"]}"#, .badRequest, "invalid_request"),
                ("direct of 3", .put, "/v1/chats/new", #"{"kind":"direct","members":["a","b","c"]}"#, .badRequest, "invalid_request"),
                ("repeated member", .put, "/v1/chats/new", #"{"kind":"group","members":["a","a"]}"#, .badRequest, "invalid_request"),
                ("text over 64 KiB", .post, "/v1/chats/g/messages", try json(["senderId": "a", "text": bigText]), .badRequest, "invalid_request"),
                ("text not a string", .post, "/v1/chats/g/messages", #"{"senderId":"a","text":5}"#, .badRequest, "invalid_request"),
                ("bad message id to send", .post, "/v1/chats/g/messages", #"{"id":"","senderId":"a","text":"x"}"#, .badRequest, "invalid_request"),
                ("ttl out of range", .post, "/v1/tokens", #"{"userId":"a","ttlSeconds":86401}"#, .badRequest, "invalid_request"),
                ("ttl of wrong type", .post, "/v1/tokens", #"{"userId":"a","ttlSeconds":"60"}"#, .badRequest, "invalid_request"),
                ("settings of wrong type", .put, "/v1/users/b/settings", #"{"readReceipts":"no"}"#, .badRequest, "invalid_request"),
                // A misspelt member is refused, not ignored: here it would have marked everything.
                ("unknown member", .post, "/v1/chats/g/read", #"{"userId":"b","messageID":["\#(id)"]}"#, .badRequest, "invalid_request"),
                ("unknown member, chat", .put, "/v1/chats/new", #"{"kind":"group","members":["a"],"name":"x"}"#, .badRequest, "invalid_request"),
                ("null messageIds", .post, "/v1/chats/g/read", #"{"userId":"b","messageIds":null}"#, .badRequest, "invalid_request"),
                ("null upTo", .post, "/v1/chats/g/delivered", #"{"userId":"b","upTo":null}"#, .badRequest, "invalid_request"),
                ("null ttl", .post, "/v1/tokens", #"{"userId":"a","ttlSeconds":null}"#, .badRequest, "invalid_request"),
                ("null message id", .post, "/v1/chats/g/messages", #"{"id":null,"senderId":"a","text":"x"}"#, .badRequest, "invalid_request"),
                ("direct of none", .put, "/v1/chats/new", #"{"kind":"direct","members":[]}"#, .badRequest, "invalid_request"),
                ("text with NUL", .post, "/v1/chats/g/messages", #"{"senderId":"a","text":"a\u0000b"}"#, .badRequest, "invalid_request"),
                ("unknown chat", .post, "/v1/chats/nope/read", #"{"userId":"b"}"#, .notFound, "not_found"),
            ]
            for (name, method, path, body, status, code) in cases {
                let response = try await client.request(method.method, path, as: tenant.apiKey, body: body)
                #expect(response.status == status, "\(name): \(response.body)")
                #expect(response.errorCode == code, "\(name): \(response.body)")
                let message = (response.json["error"] as? [String: Any])?["message"] as? String
                #expect(message?.isEmpty == false, "\(name)")
            }

            for (name, query) in [
                ("unknown labels", "labels=stars"), ("unknown tz", "tz=Mars/Olympus"), ("empty tz", "tz="), ("limit 0", "limit=0"),
                ("limit 1001", "limit=1001"), ("limit text", "limit=ten"), ("bad viewer", "viewer=a%20b"),
            ] {
                let response = try await client.request(.get, "/v1/chats/g/messages?\(query)", as: tenant.apiKey)
                #expect(response.status == .badRequest, "\(name)")
                #expect(response.errorCode == "invalid_request", "\(name)")
            }

            // Nothing changed.
            let message = try await tenant.message(id, in: "g", viewer: "a")
            #expect(message.readBy == [])
            #expect(message.deliveredTo == [])
            #expect(try await tenant.messages(in: "g", viewer: "a").count == 1)
            #expect(try await tenant.unread(for: "b").total == 1)
            #expect(try await client.request(.get, "/v1/chats/new", as: tenant.apiKey).status == .notFound)
        }
    }

    @Test("a body over 1 MiB is 413, whatever it contains")
    func payloadTooLarge() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let huge = String(repeating: "x", count: 1024 * 1024 + 1)
            // Each on a new connection: the 413 comes before the body is read, so the service
            // closes the connection after it (the test client does not reconnect).
            for (method, path) in [(HTTPMethodName.post, "/v1/chats/g/messages"), (.post, "/v1/chats/g/read"), (.put, "/v1/chats/g")] {
                let response = try await client.requestOnNewConnection(method.method, path, as: tenant.apiKey, body: huge)
                #expect(response.status == .contentTooLarge, "\(path)")
                #expect(response.errorCode == "payload_too_large")
            }
            let validButHuge = try json(["senderId": "a", "text": String(repeating: "y", count: 1024 * 1024)])
            let response = try await client.requestOnNewConnection(.post, "/v1/chats/g/messages", as: tenant.apiKey, body: validButHuge)
            #expect(response.status == .contentTooLarge)
            #expect(try await tenant.messages(in: "g", viewer: "a").isEmpty)
        }
    }
}

private func json(_ object: [String: Any]) throws -> String {
    String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
}
