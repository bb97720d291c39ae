import AsyncHTTPClient
import Foundation
import NIOCore
import OpenAPIRuntime
import ReceiptsClient
import Testing

@Suite("ReceiptsClient against the real service")
struct ClientOperationsTests {
    @Test("every operation of openapi.yaml once, through the face where it has a call")
    func everyOperation() async throws {
        try await ReceiptsService.with { service in
            let recorder = OperationRecorder()
            let receipts = try await service.tenantClient(middlewares: [recorder])
            let admin = ReceiptsClient(baseURL: service.baseURL, credential: service.adminToken, middlewares: [recorder])
            let another = try await admin.createTenant(named: "another")
            let key = try await admin.addAPIKey(to: another.id)
            #expect(try await admin.apiKeys(of: another.id).map(\.keyId).contains(key.keyId))
            try await admin.removeAPIKey(key.keyId, of: another.id)
            try await admin.rotateTokenSecret(of: another.id)
            #expect(try await admin.setLimits(of: another.id, requestsPerSecond: 50).burst == 50)
            #expect(try await admin.limits(of: another.id).source == .tenant)
            #expect(try await admin.erase(tenant: another.id).erasure == .pending)

            let token = try await receipts.userToken(for: "bob", ttl: .seconds(600))
            #expect(token.expiresAt > Date())
            let chat = try await receipts.createChat("team", members: ["alice", "bob"])
            #expect(chat.id == "team" && chat.kind == .group && chat.members.map(\.userId) == ["alice", "bob"])
            #expect(try await receipts.chat("team").members.count == 2)
            #expect(try await receipts.addMember("carol", to: "team").members.map(\.userId).contains("carol"))

            // A device's client with the user token follows the events of bob's chats.
            let bob = ReceiptsClient(baseURL: service.baseURL, credential: token.token, middlewares: [recorder])
            var bobsEvents = try await bob.events().makeAsyncIterator()

            let first = try await receipts.send("Hi!", in: "team", from: "alice")
            #expect(first.text == "Hi!" && first.senderId == "alice" && first.chatId == "team")
            let second = try await receipts.send("Lunch?", in: "team", from: "alice", id: "m2")
            #expect(second.id == "m2")

            let created = try await bobsEvents.next()
            #expect(created?.kind == .messageCreated && created?.messageIDs == [first.id] && created?.userID == "alice")

            let delivered = try await receipts.markDelivered(chatID: "team", messageIDs: [first.id], to: "carol")
            #expect(delivered.marked == 1)
            let read = try await receipts.markMessagesAsRead(chatID: "team", messageIDs: [first.id], by: "bob")
            #expect(read.marked == 1 && read.unreadCount == 1)
            let readAll = try await receipts.markChatAsRead(chatID: "team", by: "bob")
            #expect(readAll.marked == 1 && readAll.unreadCount == 0)

            let receipt = try await receipts.receipt(of: first.id, in: "team", viewer: "alice", labels: .ticks)
            #expect(receipt.receipt?.recipients == 2 && receipt.receipt?.read == 1 && receipt.receipt?.delivered == 2)
            #expect(receipt.receipt?.label == "Delivered")
            #expect(receipt.recipients?.map(\.userId).sorted() == ["bob", "carol"])
            let page = try await receipts.messages(in: "team", viewer: "alice", limit: 10)
            #expect(page.map(\.id) == [first.id, "m2"])
            #expect(page.first?.receipt?.label == "Read by 1/2")

            #expect(try await receipts.markChatAsUnread(chatID: "team", by: "bob") == 1)
            let unread = try await receipts.unreadCounts(for: "bob")
            #expect(unread.total == 1 && unread.chats.first?.markedUnread == true)
            #expect(unread.mentions == 0 && unread.chats.first?.muted == false)

            // Alice mentions Bob (not herself, not a stranger), then everyone; Bob mutes the
            // chat: it leaves his total and badge, and his mentions still count.
            let mention = try await receipts.send("@bob @alice @zed Lunch?", in: "team", from: "alice", mentions: ["bob", "alice", "zed", "bob"])
            #expect(mention.mentions == ["bob"])
            let everyone = try await receipts.send("@all Lunch at noon", in: "team", from: "alice", mentionsAll: true)
            #expect(everyone.mentions == ["bob", "carol"])
            #expect(try await receipts.receipt(of: mention.id, in: "team", viewer: "bob").mentions == ["bob"])
            let muted = try await receipts.setMuted(true, chat: "team", user: "bob")
            #expect(muted.chatId == "team" && muted.userId == "bob" && muted.muted)
            let quiet = try await receipts.unreadCounts(for: "bob")
            #expect(quiet.total == 0 && quiet.badge == "")
            #expect(quiet.mentions == 2 && quiet.mentionsBadge == "2")
            #expect(quiet.chats.map(\.chatId) == ["team"] && quiet.chats.first?.muted == true && quiet.chats.first?.mentions == 2)
            #expect(try await receipts.unreadCounts(for: "carol").mentions == 1)
            // Read, the mentions stop counting; unmuted, the chat is back in the total.
            try await receipts.markChatAsRead(chatID: "team", by: "bob", upTo: mention.id)
            #expect(try await receipts.unreadCounts(for: "bob").mentions == 1)
            #expect(try await receipts.setMuted(false, chat: "team", user: "bob").muted == false)
            let loud = try await receipts.unreadCounts(for: "bob")
            #expect(loud.total == 1 && loud.badge == "1" && loud.mentions == 1 && loud.chats.first?.muted == false)

            // Bob replies in the thread of Alice's first message: the reply is listed in the
            // thread, not on the main timeline; the root shows the thread's summary; the reply
            // is unread for Alice like any message.
            let reply = try await receipts.send("Noon works", in: "team", from: "bob", threadID: first.id)
            #expect(reply.threadId == first.id && reply.thread == nil && reply.chatId == "team")
            let root = try await receipts.receipt(of: first.id, in: "team", viewer: "alice")
            #expect(root.threadId == nil && root.thread?.replies == 1 && root.thread?.lastReplyAt == reply.createdAt)
            let thread = try await receipts.messages(in: "team", viewer: "bob", thread: first.id)
            #expect(thread.map(\.id) == [reply.id] && thread.first?.threadId == first.id)
            #expect(thread.first?.receipt?.recipients == 2)
            let timeline = try await receipts.messages(in: "team", viewer: "alice")
            #expect(timeline.map(\.id) == [first.id, "m2", mention.id, everyone.id])
            #expect(timeline.allSatisfy { $0.threadId == nil })
            #expect(timeline.first?.thread?.replies == 1)
            #expect(try await receipts.unreadCounts(for: "alice").total == 1)
            // A reply is no root, and cannot be replied to or listed as one.
            let nested = await #expect(throws: ReceiptsError.self) {
                try await receipts.send("Deeper", in: "team", from: "alice", threadID: reply.id)
            }
            #expect(nested?.code == .invalidRequest && nested?.status == 400)
            let notARoot = await #expect(throws: ReceiptsError.self) { try await receipts.messages(in: "team", thread: reply.id) }
            #expect(notARoot?.code == .notFound && notARoot?.status == 404)
            // Bob's stream: his unread.changed events carry his unread mentions (1 after
            // reading up to the first mention), and his reply's message.created its thread.
            var followed: [ReceiptsEvent] = []
            while let event = try await bobsEvents.next() {
                followed.append(event)
                if event.kind == .messageCreated && event.messageIDs == [reply.id] { break }
            }
            #expect(followed.last?.threadID == first.id && followed.last?.userID == "bob")
            #expect(followed.filter { $0.kind == .messageCreated && $0.messageIDs != [reply.id] }.allSatisfy { $0.threadID == nil })
            let unreadMentions = followed.compactMap { event -> Int? in
                if case .unreadChanged = event.kind { event.unreadMentions } else { nil }
            }
            #expect(unreadMentions.last == 1, "\(followed)")

            #expect(try await receipts.setReadReceipts(false, for: "carol").readReceipts == false)
            #expect(try await receipts.removeMember("carol", from: "team").members.map(\.userId) == ["alice", "bob"])
            let edited = try await receipts.editMessage("m2", in: "team", text: "Lunch!")
            #expect(edited.text == "Lunch!" && edited.editedAt != nil && edited.id == "m2")
            try await receipts.deleteMessage("m2", in: "team")
            #expect(try await receipts.messages(in: "team", viewer: "alice").map(\.id) == [first.id, mention.id, everyone.id])
            try await receipts.createChat("scratch", members: ["alice"])
            try await receipts.deleteChat("scratch")
            try await receipts.revokeTokens(of: "nobody")
            #expect(try await receipts.erase(user: "nobody", deletingMessages: true).erasure == .pending)
            #expect(try await receipts.erasure(of: "nobody").userId == "nobody")
            #expect(try await receipts.setAllowedOrigins(["HTTPS://Chat.Example.com/", "https://*.example.com"]) == ["https://chat.example.com", "https://*.example.com"])
            #expect(try await receipts.allowedOrigins() == ["https://chat.example.com", "https://*.example.com"])

            // History imported: a chat with a message Bob read, from a file; then its status.
            let history = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID().uuidString).ndjson")
            try Data("""
                {"type":"chat","id":"archive","kind":"direct","members":[{"userId":"alice"},{"userId":"bob"}]}
                {"type":"message","id":"old1","chatId":"archive","senderId":"alice","text":"From 2019","createdAt":"2019-06-01T08:00:00Z","readBy":[{"userId":"bob","at":"2019-06-01T08:03:00Z"}]}

                """.utf8).write(to: history)
            defer { try? FileManager.default.removeItem(at: history) }
            let started = try await receipts.startImport(contentsOf: history)
            let imported = try await receipts.waitForImport(started.importId, every: .milliseconds(50), timeout: .seconds(60))
            #expect(imported.state == .done && imported.imported.messages == 1 && imported.rejected == 0)
            #expect(try await receipts.importStatus(started.importId).lines == 2)
            let old = try await receipts.receipt(of: "old1", in: "archive", viewer: "alice")
            #expect(old.receipt?.label == "Read" && old.createdAt == Date(timeIntervalSince1970: 1_559_376_000))
            let again = try await receipts.startImport(ndjson: Data(#"{"type":"read","chatId":"archive","userId":"bob","upTo":"old1"}"#.utf8))
            #expect(try await receipts.waitForImport(again.importId, every: .milliseconds(50)).imported.receipts == 0)

            // The rest through the generated client, with the same credential and errors.
            #expect(try await receipts.generated.healthz().ok.body.json.status == "ok")
            #expect(try await receipts.generated.readyz().ok.body.json.status == "ready")
            _ = try await receipts.generated.metrics().ok.body.plainText
            _ = try await receipts.generated.openapi().ok
            await #expect(throws: ReceiptsError.self) {
                // A plain GET is no WebSocket upgrade: 426 with the contract's code.
                do { _ = try await receipts.generated.streamEvents() } catch let error as ClientError { throw error.underlyingError }
            }
            // Webhooks, through the generated client.
            let hook = try await receipts.generated.putWebhook(
                path: .init(webhookId: "backend"), body: .json(.init(url: "https://hooks.example.com/receipts"))
            ).created.body.json
            #expect(hook.id == "backend" && hook.events.count == 4 && hook.secret.hasPrefix("whsec_"))
            #expect(try await receipts.generated.getWebhook(path: .init(webhookId: "backend")).ok.body.json.delivery.failures == 0)
            #expect(try await receipts.generated.listWebhooks().ok.body.json.webhooks.map(\.id) == ["backend"])
            let rotated = try await receipts.generated.rotateWebhookSecret(path: .init(webhookId: "backend")).ok.body.json
            #expect(rotated.secret.hasPrefix("whsec_") && rotated.secret != hook.secret && rotated.previousExpiresAt > Date())
            #expect(try await receipts.generated.listWebhookAttempts(path: .init(webhookId: "backend")).ok.body.json.attempts.count <= 100)
            // A replay from an id that is no event of the tenant: 400 in the contract's shape.
            await #expect(throws: ReceiptsError.self) {
                do {
                    _ = try await receipts.generated.replayWebhook(path: .init(webhookId: "backend"), body: .json(.init(after: "0")))
                } catch let error as ClientError { throw error.underlyingError }
            }
            _ = try await receipts.generated.deleteWebhook(path: .init(webhookId: "backend")).noContent

            let ran = Set(recorder.operations)
            let documented = try ContractOperations.all()
            #expect(documented.count >= 20)
            #expect(documented.subtracting(ran).isEmpty, "not run: \(documented.subtracting(ran).sorted())")
            #expect(ran.subtracting(documented).isEmpty)
        }
    }

    @Test("an error answer throws ReceiptsError with the contract's code and status")
    func errorsCarryTheirCode() async throws {
        try await ReceiptsService.with { service in
            let receipts = try await service.tenantClient()
            try await receipts.createChat("pair", kind: .direct, members: ["a", "b"])

            let notFound = await #expect(throws: ReceiptsError.self) { try await receipts.chat("nowhere") }
            #expect(notFound?.code == .notFound && notFound?.status == 404)
            let conflict = await #expect(throws: ReceiptsError.self) { try await receipts.createChat("pair", members: ["a", "c"]) }
            #expect(conflict?.code == .conflict && conflict?.status == 409)
            let invalid = await #expect(throws: ReceiptsError.self) {
                try await receipts.markMessagesAsRead(chatID: "pair", messageIDs: [], by: "a")
            }
            #expect(invalid?.code == .invalidRequest && invalid?.status == 400)
            let forbidden = await #expect(throws: ReceiptsError.self) { try await receipts.send("hi", in: "pair", from: "stranger") }
            #expect(forbidden?.code == .forbidden && forbidden?.status == 403)

            let stranger = ReceiptsClient(baseURL: service.baseURL, credential: "not-a-key")
            let unauthorized = await #expect(throws: ReceiptsError.self) { try await stranger.unreadCounts(for: "a") }
            #expect(unauthorized?.code == .unauthorized && unauthorized?.status == 401)
            // The event sequence does not retry what retrying cannot fix.
            let refused = await #expect(throws: ReceiptsError.self) { try await stranger.events() }
            #expect(refused?.code == .unauthorized)
        }
    }

    @Test("a tenant over its rate limit gets ReceiptsError rate_limited with the wait the service asked for, not retried")
    func rateLimitedCarriesRetryAfter() async throws {
        try await ReceiptsService.with { service in
            let tenant = try await service.admin.createTenant(named: "limited")
            _ = try await service.admin.setLimits(of: tenant.id, requestsPerSecond: 1, burst: 1)
            let receipts = ReceiptsClient(baseURL: service.baseURL, credential: tenant.apiKey)
            // Five at once against a burst of one (one after the other, a slow answer could
            // let the bucket refill between them).
            let errors = await withTaskGroup(of: ReceiptsError?.self) { group in
                for _ in 0..<5 {
                    group.addTask {
                        do {
                            _ = try await receipts.unreadCounts(for: "a")
                            return nil
                        } catch {
                            return error as? ReceiptsError
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let limited = errors.compactMap { $0 }
            #expect(!limited.isEmpty, "\(errors)")
            #expect(limited.allSatisfy { $0.code == .rateLimited && $0.status == 429 && $0.retryAfter == 1 }, "\(limited)")
        }
    }

    @Test("idempotent calls are retried after a connection error, a bounded number of times; others never")
    func retriesOnlyIdempotentCalls() async throws {
        // A port nothing listens on (receiptsd started and killed: the port was free).
        let service = try await ReceiptsService.start()
        service.kill()
        let recorder = OperationRecorder()
        let policy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(10), maximumDelay: .milliseconds(20))
        // AsyncHTTPClient keeps trying to connect until its connect timeout (5 s in the
        // client's default): short here, so that twelve attempts take about a second.
        let httpClient = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: .init(timeout: .init(connect: .milliseconds(100))))
        let receipts = ReceiptsClient(
            baseURL: service.baseURL, credential: "key", configuration: .init(retry: policy), httpClient: httpClient,
            middlewares: [recorder])

        await #expect(throws: (any Error).self) { try await receipts.chat("c") }
        await #expect(throws: (any Error).self) { try await receipts.markChatAsRead(chatID: "c", by: "u") }
        // `send` names its message, so repeating it cannot store a second one.
        await #expect(throws: (any Error).self) { try await receipts.send("hi", in: "c", from: "u") }
        await #expect(throws: (any Error).self) { try await receipts.userToken(for: "u") }
        await #expect(throws: (any Error).self) { try await receipts.createTenant(named: "t") }
        await #expect(throws: (any Error).self) {
            try await receipts.generated.sendMessage(path: .init(chatId: "c"), body: .json(.init(senderId: "u", text: "no id")))
        }
        #expect(
            recorder.operations == [
                "getChat", "getChat", "getChat", "markRead", "markRead", "markRead", "sendMessage", "sendMessage", "sendMessage",
                "createToken", "createTenant", "sendMessage",
            ])
        try await httpClient.shutdown()
    }
}
