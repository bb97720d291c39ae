import Foundation
import HTTPTypes
import Postgres
import ReceiptsServer
import TestSupport
import Testing

/// docs/api.md, "Importing history": `POST /v1/imports` loads a chat app's history so that
/// every answer is as if it had been sent and read through the API.
@Suite("Imports")
struct ImportTests {
    @Test("an import answers every read as the same history sent and read through the API does", arguments: [1, 2, 3] as [UInt64])
    func importEqualsTheAPI(seed: UInt64) async throws {
        try await TestService.run { client in
            let scenario = ImportScenario(seed: seed)
            let imported = try await client.createTenant()
            let replayed = try await client.createTenant()

            let state = try await Self.importAndWait(scenario.ndjson, into: imported, client: client)
            #expect(state.state == "done")
            #expect(state.rejected == 0, "\(state.errors)")
            #expect(state.imported.chats == scenario.chats.count)
            #expect(state.imported.messages == scenario.messages.count)

            try await Self.replay(scenario, into: replayed, client: client)

            for user in scenario.users {
                let viaImport = try await imported.unread(for: user)
                let viaAPI = try await replayed.unread(for: user)
                #expect(viaImport.chats == viaAPI.chats, "unread of \(user)")
                #expect(viaImport.total == viaAPI.total && viaImport.mentions == viaAPI.mentions, "totals of \(user)")
            }
            for chat in scenario.chats {
                let roots = Set(scenario.messages.filter { $0.chat == chat.id }.compactMap(\.thread))
                for member in chat.members {
                    for query in [""] + roots.sorted().map({ "&thread=\($0)" }) {
                        let viaImport = try await imported.messages(in: chat.id, viewer: member.user, query: query + "&limit=100")
                        let viaAPI = try await replayed.messages(in: chat.id, viewer: member.user, query: query + "&limit=100")
                        #expect(viaImport.map(Self.comparable) == viaAPI.map(Self.comparable), "\(chat.id) as \(member.user) \(query)")
                    }
                }
            }
            for message in scenario.messages {
                let viaImport = try await imported.message(message.id, in: message.chat, viewer: message.sender)
                let viaAPI = try await replayed.message(message.id, in: message.chat, viewer: message.sender)
                #expect(Self.comparable(viaImport) == Self.comparable(viaAPI), "\(message.id)")
                // Sent at the time given, not when it was imported.
                #expect(try Self.sameInstant(viaImport.createdAt, ImportScenario.time(message.minute)))
            }
        }
    }

    @Test("a message's readers keep the times given: readAt and deliveredAt, each in its own order, and a read without a time is one at the message's")
    func receiptTimes() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let body = """
                {"type":"chat","id":"c","kind":"group","members":[{"userId":"a"},{"userId":"b"},{"userId":"c"},{"userId":"d"},{"userId":"e"}]}
                {"type":"message","id":"m1","chatId":"c","senderId":"a","text":"hi","createdAt":"2024-03-01T10:00:00Z","readBy":[{"userId":"b","at":"2024-03-01T10:05:00Z"},{"userId":"c"},{"userId":"e","at":"2024-03-01T10:04:00Z"}],"deliveredTo":[{"userId":"b","at":"2024-03-01T10:01:00Z"},{"userId":"d","at":"2024-03-01T10:03:00Z"}]}
                """
            let state = try await Self.importAndWait(body, into: tenant, client: client)
            #expect(state.rejected == 0 && state.imported.messages == 1 && state.imported.receipts == 7)
            let message = try await tenant.message("m1", in: "c", viewer: "a")
            let recipients = Dictionary(uniqueKeysWithValues: (message.recipients ?? []).map { ($0.userId, $0) })
            // Read in the order c, e, b; delivered in the order c, b, d, e: each keeps its own times.
            #expect(try Self.sameInstant(recipients["b"]?.readAt, "2024-03-01T10:05:00Z"))
            #expect(try Self.sameInstant(recipients["b"]?.deliveredAt, "2024-03-01T10:01:00Z"))
            #expect(try Self.sameInstant(recipients["c"]?.readAt, "2024-03-01T10:00:00Z"))
            #expect(try Self.sameInstant(recipients["c"]?.deliveredAt, "2024-03-01T10:00:00Z"))
            #expect(recipients["d"]?.readAt == nil)
            #expect(try Self.sameInstant(recipients["d"]?.deliveredAt, "2024-03-01T10:03:00Z"))
            #expect(try Self.sameInstant(recipients["e"]?.readAt, "2024-03-01T10:04:00Z"))
            #expect(try Self.sameInstant(recipients["e"]?.deliveredAt, "2024-03-01T10:04:00Z"))
            #expect(message.receipt?.state == "delivered" && message.receipt?.read == 3 && message.receipt?.delivered == 4)
        }
    }

    @Test("a line that breaks a rule is rejected with its line number and code; the lines around it go in")
    func rejectedLines() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let body = """
                {"type":"chat","id":"c","kind":"group","members":[{"userId":"a"},{"userId":"b"},{"userId":"late","joinedAt":"2024-03-01T12:00:00Z"}]}
                {"type":"message","id":"m1","chatId":"c","senderId":"a","text":"ok","createdAt":"2024-03-01T10:00:00Z"}
                {"type":"message","id":"m2","chatId":"c","senderId":"mallory","text":"not a member","createdAt":"2024-03-01T10:01:00Z"}
                not json at all
                {"type":"message","id":"m3","chatId":"nowhere","senderId":"a","text":"no chat","createdAt":"2024-03-01T10:02:00Z"}
                {"type":"message","id":"m4","chatId":"c","senderId":"b","text":"early read","createdAt":"2024-03-01T10:03:00Z","readBy":[{"userId":"a","at":"2024-03-01T09:00:00Z"}]}

                {"type":"message","id":"m5","chatId":"c","senderId":"b","text":"reply","createdAt":"2024-03-01T10:04:00Z","threadId":"missing"}
                {"type":"message","id":"m6","chatId":"c","senderId":"b","text":"read by a latecomer","createdAt":"2024-03-01T10:05:00Z","readBy":[{"userId":"late"}]}
                {"type":"read","chatId":"c","userId":"b","upTo":"m9"}
                {"type":"message","id":"m7","chatId":"c","senderId":"b","text":"fine","createdAt":"2024-03-01T10:06:00Z"}
                {"type":"message","id":"bad id!","chatId":"c","senderId":"b","text":"x","createdAt":"2024-03-01T10:07:00Z"}
                {"type":"read","chatId":"c","userId":"b","upTo":"m1","at":"2024-03-01T11:00:00Z"}
                """
            let state = try await Self.importAndWait(body, into: tenant, client: client)
            #expect(state.state == "done")
            #expect(state.lines == 13)
            #expect(state.imported.chats == 1 && state.imported.messages == 2)
            #expect(state.rejected == 8)
            #expect(state.errors.map(\.line) == [3, 4, 5, 6, 8, 9, 10, 12])
            #expect(state.errors.map(\.code) == [
                "not_member", "invalid_json", "chat_not_found", "read_before_message", "thread_not_found", "not_recipient",
                "message_not_found", "invalid_line",
            ])
            #expect(state.errors.allSatisfy { !$0.message.isEmpty })
            #expect(try await tenant.messages(in: "c", viewer: "a").map(\.id) == ["m1", "m7"])
            // b read m1 (at 11:00): a's m1 shows it, b has m7... its own: nothing unread.
            #expect(try await tenant.message("m1", in: "c", viewer: "a").readBy == ["b"])
            #expect(try await tenant.unread(for: "b").total == 0)
            #expect(try await tenant.unread(for: "a").count(in: "c") == 1)
        }
    }

    @Test("importing the same file again changes nothing and rejects nothing")
    func importingTwice() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let scenario = ImportScenario(seed: 7)
            let first = try await Self.importAndWait(scenario.ndjson, into: tenant, client: client)
            #expect(first.rejected == 0 && first.imported.messages == scenario.messages.count)
            let before = try await Self.snapshot(of: scenario, in: tenant)
            let second = try await Self.importAndWait(scenario.ndjson, into: tenant, client: client)
            #expect(second.state == "done" && second.rejected == 0)
            #expect(second.imported.chats == 0 && second.imported.messages == 0 && second.imported.receipts == 0)
            #expect(try await Self.snapshot(of: scenario, in: tenant) == before)
        }
    }

    @Test("chat.imported, one per chat, reaches the tenant key's stream; no per-message event does")
    func importedEvents() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let scenario = ImportScenario(seed: 11)
            try await StreamClients.withEventSource(port: client.port, credential: tenant.apiKey) { stream in
                _ = try await Self.importAndWait(scenario.ndjson, into: tenant, client: client)
                try await tenant.createChat("after", members: ["x", "y"])
                _ = try await tenant.send(in: "after", from: "x")
                var types: [String] = []
                var chats: [String] = []
                while let event = await stream.next(within: .seconds(10)) {
                    let type = event["type"] as? String ?? ""
                    if type == "message.created" { break }
                    types.append(type)
                    chats.append(event["chatId"] as? String ?? "")
                    #expect(event["userId"] == nil && event["messageIds"] == nil)
                }
                #expect(types == Array(repeating: "chat.imported", count: scenario.chats.count))
                #expect(chats.sorted() == scenario.chats.map(\.id).sorted())
            }
        }
    }

    @Test("bad bodies: not NDJSON 400, another content type 415, over the limit 413, a user token 403; another tenant's import 404")
    func badBodies() async throws {
        try await TestService.run(configure: { $0.imports.maximumBytes = 1000 }) { client in
            let tenant = try await client.createTenant()
            let other = try await client.createTenant()
            let ndjson: HTTPFields = [.contentType: "application/x-ndjson"]
            let line = #"{"type":"chat","id":"c","kind":"direct","members":[{"userId":"a"},{"userId":"b"}]}"#
            let cases: [(String?, String, HTTPFields, HTTPResponse.Status, String)] = [
                (tenant.apiKey, "[1,2,3]\n" + line, ndjson, .badRequest, "invalid_request"),
                (tenant.apiKey, "", ndjson, .badRequest, "invalid_request"),
                (tenant.apiKey, line, [.contentType: "text/csv"], .unsupportedMediaType, "unsupported_media_type"),
                (tenant.apiKey, String(repeating: line + "\n", count: 20), ndjson, .contentTooLarge, "payload_too_large"),
                (try await tenant.token(for: "a"), line, ndjson, .forbidden, "forbidden"),
            ]
            for (credential, body, headers, status, code) in cases {
                let response = try await client.request(.post, "/v1/imports", as: credential, body: body, headers: headers)
                #expect(response.status == status, "\(body.prefix(40)): \(response.body)")
                #expect((response.json["error"] as? [String: Any])?["code"] as? String == code)
            }
            // Nothing of them was staged: no chat.
            #expect(try await client.request(.get, "/v1/chats/c", as: tenant.apiKey).status == .notFound)

            let accepted = try await client.request(.post, "/v1/imports", as: tenant.apiKey, body: line, headers: ndjson)
            #expect(accepted.status == .accepted)
            let id = try #require(accepted.json["importId"] as? String)
            #expect(try await client.request(.get, "/v1/imports/\(id)", as: other.apiKey).status == .notFound)
            #expect(try await client.request(.get, "/v1/imports/\(id)", as: tenant.apiKey).status == .ok)
        }
    }

    @Test("receiptsd import FILE --tenant ID loads the file as POST /v1/imports does and prints a summary; an unknown tenant is refused")
    func commandLine() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let scenario = ImportScenario(seed: 5)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent(TestDatabase.uniqueName("import") + ".ndjson")
            try Data((scenario.ndjson + "not json\n").utf8).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let environment = ["DATABASE_URL": TestDatabase.url]
            let result = try await TestDatabase.run(
                TestDatabase.receiptsdExecutable, arguments: ["import", file.path, "--tenant", tenant.id], environment: environment)
            #expect(result.output.contains(": done in "), "\(result.output)")
            #expect(result.output.contains("imported: \(scenario.chats.count) chats, \(scenario.messages.count) messages"))
            #expect(result.output.contains("rejected: 1 lines"))
            #expect(result.output.contains("line \(scenario.ndjson.split(separator: "\n").count + 1): invalid_json"))
            let message = try #require(scenario.messages.first)
            #expect(try await tenant.message(message.id, in: message.chat, viewer: message.sender).text == message.text)

            let unknown = try await TestDatabase.run(
                TestDatabase.receiptsdExecutable, arguments: ["import", file.path, "--tenant", "no-such-tenant"], environment: environment,
                allowFailure: true)
            #expect(unknown.status != 0 && unknown.errorOutput.contains("there is no tenant no-such-tenant"))
        }
    }

    @Test("docs/export/postgresql.sql, run with psql against a chat app's tables, writes a file the import takes whole")
    func exportFromPostgreSQL() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let schema = TestDatabase.uniqueName("chatapp").replacingOccurrences(of: "-", with: "_")
            try await TestDatabase.pool.withConnection { connection in
                _ = try await connection.executeScript(
                    """
                    CREATE SCHEMA \(schema);
                    SET search_path = \(schema);
                    CREATE TABLE conversations (id int, kind text, created_at timestamptz);
                    CREATE TABLE participants (conversation_id int, user_id text, joined_at timestamptz);
                    CREATE TABLE messages (id int, conversation_id int, author_id text, body text, sent_at timestamptz, parent_id int);
                    CREATE TABLE message_reads (message_id int, user_id text, read_at timestamptz);
                    CREATE TABLE last_read (conversation_id int, user_id text, message_id int, read_at timestamptz);
                    INSERT INTO conversations VALUES (1, 'group', '2024-01-01 08:00+00'), (2, 'direct', '2024-01-01 08:00+00');
                    INSERT INTO participants VALUES (1, 'ann', '2024-01-01 08:00+00'), (1, 'ben', '2024-01-01 08:00+00'),
                        (1, 'cat', '2024-01-01 12:00+00'), (2, 'ann', '2024-01-01 08:00+00'), (2, 'ben', '2024-01-01 08:00+00');
                    INSERT INTO messages VALUES (10, 1, 'ann', E'hi "all"\\n\\tand \\\\ back', '2024-01-01 09:00:00.123456+00', NULL),
                        (11, 1, 'ben', 're', '2024-01-01 13:00+00', 10), (12, 2, 'ann', 'dm', '2024-01-01 10:00+00', NULL);
                    INSERT INTO message_reads VALUES (10, 'ben', '2024-01-01 09:01+00'), (11, 'cat', '2024-01-01 13:05+00');
                    INSERT INTO last_read VALUES (2, 'ben', 12, '2024-01-01 11:00+00');
                    RESET search_path;
                    """)
            }
            let export = try await TestDatabase.run(
                "/usr/bin/psql", arguments: ["-XAt", "-v", "ON_ERROR_STOP=1", "-f", "docs/export/postgresql.sql", TestDatabase.url],
                environment: ["PGOPTIONS": "-c search_path=\(schema)"])
            #expect(export.output.split(separator: "\n").count == 6, "\(export.output)")
            let state = try await Self.importAndWait(export.output, into: tenant, client: client)
            #expect(state.rejected == 0, "\(state.errors)")
            #expect(state.imported.chats == 2 && state.imported.messages == 3 && state.imported.receipts == 6)
            let first = try await tenant.message("10", in: "1", viewer: "ann")
            #expect(first.text == "hi \"all\"\n\tand \\ back" && first.receipt?.label == "Read by all" && first.receipt?.recipients == 1)
            #expect(try await tenant.message("11", in: "1", viewer: "ben").threadId == "10")
            #expect(try await tenant.unread(for: "ben").total == 0)
            _ = try await TestDatabase.pool.query("DROP SCHEMA \(schema) CASCADE", [])
        }
    }

    // MARK: - Helpers

    struct StateBody: Decodable {
        struct Imported: Decodable {
            let chats: Int
            let messages: Int
            let receipts: Int
        }

        struct LineError: Decodable {
            let line: Int
            let code: String
            let message: String
        }

        let importId: String
        let state: String
        let lines: Int
        let imported: Imported
        let rejected: Int
        let errors: [LineError]
    }

    /// Posts `body` as an import and waits (up to 60 s) until it is no longer running.
    static func importAndWait(_ body: String, into tenant: TestTenant, client: APIClient) async throws -> StateBody {
        let accepted = try await client.request(
            .post, "/v1/imports", as: tenant.apiKey, body: body, headers: [.contentType: "application/x-ndjson"])
        try #require(accepted.status == .accepted, "\(accepted.body)")
        let id = try #require(accepted.json["importId"] as? String)
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let response = try await client.request(.get, "/v1/imports/\(id)", as: tenant.apiKey)
            try #require(response.status == .ok, "\(response.body)")
            let state = try response.decode(StateBody.self)
            if state.state != "running" { return state }
            try #require(ContinuousClock.now < deadline, "the import did not finish in 60 s")
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Sends the scenario's history through the API, step by step in the order of its times.
    static func replay(_ scenario: ImportScenario, into tenant: TestTenant, client: APIClient) async throws {
        for chat in scenario.chats {
            let response = try await tenant.createChat(chat.id, kind: chat.kind, members: chat.members.filter { $0.joinedAt == 0 }.map(\.user))
            try #require(response.status == .created, "\(response.body)")
        }
        for step in scenario.steps {
            switch step {
            case .join(let chat, let user):
                let response = try await client.request(.post, "/v1/chats/\(chat)/members", as: tenant.apiKey, json: ["userId": user])
                try #require(response.status == .ok, "\(response.body)")
            case .send(let message):
                var body: [String: Any] = ["id": message.id, "senderId": message.sender, "text": message.text]
                if let thread = message.thread { body["threadId"] = thread }
                if !message.mentions.isEmpty { body["mentions"] = message.mentions }
                let response = try await client.request(.post, "/v1/chats/\(message.chat)/messages", as: tenant.apiKey, json: body)
                try #require(response.status == .created, "\(response.body)")
            case .read(let chat, let user, let message):
                try await tenant.read(in: chat, by: user, ["messageIds": [message]])
            case .deliver(let chat, let user, let message):
                try await tenant.deliver(in: chat, to: user, ["messageIds": [message]])
            case .position(let position):
                if position.isRead {
                    try await tenant.read(in: position.chat, by: position.user, ["upTo": position.upTo])
                } else {
                    try await tenant.deliver(in: position.chat, to: position.user, ["upTo": position.upTo])
                }
            }
        }
    }

    /// What a message answer says, but its times (sent, read, replied: the import keeps the
    /// given ones, the replay has its own): whether each recipient's are there instead.
    static func comparable(_ message: TestMessage) -> String {
        let receipt = message.receipt.map { receipt in
            let label = (receipt.label ?? "").replacingOccurrences(of: #"\d{1,2}:\d{2}( [AP]M)?"#, with: "TIME", options: .regularExpression)
            return "\(receipt.state) \(receipt.recipients) \(receipt.delivered) \(receipt.read) \(receipt.readAt != nil) \(label)"
        }
        let recipients = (message.recipients ?? []).map { "\($0.userId):\($0.deliveredAt != nil):\($0.readAt != nil)" }
        return [
            message.id, "\(message.seq)", message.senderId, message.text, message.threadId ?? "-", message.mentions.joined(separator: ","),
            // Readers of one message at one minute may be in either order.
            message.readBy.sorted().joined(separator: ","), message.deliveredTo.sorted().joined(separator: ","),
            "\(message.thread?.replies ?? -1)", receipt ?? "-", recipients.joined(separator: ","),
        ].joined(separator: " | ")
    }

    /// Every user's unread answer and every chat's messages as its members see them.
    static func snapshot(of scenario: ImportScenario, in tenant: TestTenant) async throws -> [String] {
        var answers: [String] = []
        for user in scenario.users {
            let unread = try await tenant.unread(for: user)
            answers.append("\(user) \(unread.total) \(unread.mentions) \(unread.chats)")
        }
        for chat in scenario.chats {
            for member in chat.members {
                let messages = try await tenant.messages(in: chat.id, viewer: member.user, query: "&limit=100")
                answers.append(contentsOf: messages.map { Self.comparable($0) + " \($0.createdAt)" })
            }
        }
        return answers
    }

    static func sameInstant(_ shown: String?, _ expected: String) throws -> Bool {
        guard let shown else { return false }
        let parse = { (text: String) throws -> Date in
            try Date(text, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true))
        }
        let expectedDate = try (try? parse(expected)) ?? Date(expected, strategy: .iso8601)
        return try parse(shown) == expectedDate
    }
}
