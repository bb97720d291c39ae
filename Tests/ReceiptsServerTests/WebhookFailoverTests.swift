import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

/// Webhooks across `kill -9`, restarts and two instances: `receiptsd` processes on a
/// database of their own, a receiver on loopback. Leases last 11 s (the shortest
/// `RECEIPTS_WEBHOOK_LEASE_SECONDS` allows), so a take-over after `kill -9` comes within
/// about 12 s.
@Suite("Webhooks across restarts and instances")
struct WebhookFailoverTests {
    static let adminToken = TestDatabase.uniqueName("admin")

    static func start(database url: String) async throws -> ReceiptsdProcess {
        try await ReceiptsdProcess.start(
            arguments: [],
            environment: [
                "DATABASE_URL": url, "RECEIPTS_ADMIN_TOKEN": adminToken, "LOG_LEVEL": "error",
                "RECEIPTS_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true", "RECEIPTS_WEBHOOK_LEASE_SECONDS": "11",
                "RECEIPTS_WEBHOOK_RETRY_BASE_MILLISECONDS": "100",
            ])
    }

    /// Sends `body` and returns the status and JSON answer.
    @discardableResult
    static func send(
        _ method: HTTPMethod, _ url: String, as credential: String, json: String? = nil
    ) async throws -> (status: Int, json: [String: Any]) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(credential)")
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any]
        return (Int(response.status.code), object ?? [:])
    }

    /// A tenant with chats `chat0`… of alice and bob, made on `service`; its API key.
    static func tenant(on service: ReceiptsdProcess, chats: Int) async throws -> String {
        let created = try await send(.POST, service.baseURL + "/admin/v1/tenants", as: adminToken, json: #"{"name":"webhooks"}"#)
        let apiKey = try #require(created.json["apiKey"] as? String)
        for chat in 0..<chats {
            let answer = try await send(.PUT, service.baseURL + "/v1/chats/chat\(chat)", as: apiKey, json: #"{"kind":"group","members":["alice","bob"]}"#)
            #expect(answer.status == 201)
        }
        return apiKey
    }

    /// Sends `count` messages through `service`, spread over `chats` chats, a chat's in order.
    static func write(_ count: Int, chats: Int, through service: ReceiptsdProcess, apiKey: String) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for chat in 0..<chats {
                group.addTask {
                    for index in stride(from: chat, to: count, by: chats) {
                        // Another instance learns of a new tenant within 1 s: retried until then.
                        for attempt in 0..<50 {
                            let answer = try await send(
                                .POST, service.baseURL + "/v1/chats/chat\(chat)/messages", as: apiKey,
                                json: #"{"senderId":"alice","text":"m\#(index)"}"#)
                            if answer.status == 201 { break }
                            #expect(attempt < 49, "send: \(answer.status)")
                            try await Task.sleep(for: .milliseconds(100))
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Every event id of the tenant's stream, replayed from the start.
    static func streamIds(on service: ReceiptsdProcess, apiKey: String, count: Int) async throws -> [String] {
        var ids: [String] = []
        try await StreamClients.withEventSource(port: service.port, credential: apiKey, lastEventID: "0") { stream in
            ids = await stream.take(count, within: .seconds(30)).compactMap { $0["id"] as? String }
        }
        return ids
    }

    /// How many webhooks `service` delivers (`receipts_webhooks_delivering`).
    static func delivering(_ service: ReceiptsdProcess) async throws -> Int {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: service.baseURL + "/metrics"), timeout: .seconds(5))
        let text = String(buffer: try await response.body.collect(upTo: 1 << 22))
        let line = text.split(separator: "\n").first { $0.hasPrefix("receipts_webhooks_delivering ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) } ?? 0
    }

    @Test("kill -9 while a batch is out: after a new start the receiver gets that batch again and the rest, nothing skipped, in order")
    func restartAfterKill() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await TestDatabase.withFreshDatabase { url in
            let first = try await Self.start(database: url)
            defer { first.kill() }
            let apiKey = try await Self.tenant(on: first, chats: 3)
            // The first batches are answered, slowly; then one is never answered: the
            // service is killed while it waits for that answer.
            receiver.script(Array(repeating: .delayed(.milliseconds(50)), count: 3) + [.silence])
            let put = try await Self.send(.PUT, first.baseURL + "/v1/webhooks/hook", as: apiKey, json: #"{"url":"\#(receiver.url)"}"#)
            #expect(put.status == 201)
            try await Self.write(300, chats: 3, through: first, apiKey: apiKey)
            await receiver.wait { $0.count >= 4 }
            first.kill()
            let acknowledged = Set(receiver.requests.prefix(3).flatMap(\.eventIds))
            let unanswered = receiver.requests[3].eventIds
            #expect(!unanswered.isEmpty)

            let second = try await Self.start(database: url)
            defer { second.kill() }
            try await Self.write(100, chats: 3, through: second, apiKey: apiKey)
            let all = try await Self.streamIds(on: second, apiKey: apiKey, count: 400)
            #expect(all.count == 400)
            let delivered = await receiver.waitForEvents(400, within: .seconds(30))
            #expect(delivered == all)
            // The batch that was out when the process died came again; acknowledged ones did not.
            let afterRestart = receiver.requests.dropFirst(4).flatMap(\.eventIds)
            #expect(afterRestart.prefix(unanswered.count).elementsEqual(unanswered))
            #expect(acknowledged.isDisjoint(with: afterRestart))
        }
    }

    /// Two instances on a fresh database, a tenant of `chats` chats made through the first,
    /// and its webhook `hook` to `receiver` put through the second; the body gets both and
    /// the tenant's API key.
    static func withTwoInstances(
        receiver: WebhookReceiver, chats: Int, _ body: (ReceiptsdProcess, ReceiptsdProcess, String) async throws -> Void
    ) async throws {
        try await TestDatabase.withFreshDatabase { url in
            let one = try await Self.start(database: url)
            defer { one.kill() }
            let other = try await Self.start(database: url)
            defer { other.kill() }
            let apiKey = try await Self.tenant(on: one, chats: chats)
            let put = try await Self.send(.PUT, other.baseURL + "/v1/webhooks/hook", as: apiKey, json: #"{"url":"\#(receiver.url)"}"#)
            try #require(put.status == 201)
            try await body(one, other, apiKey)
        }
    }

    /// Which of the two delivers the webhook, and the other.
    static func holder(
        of one: ReceiptsdProcess, _ other: ReceiptsdProcess
    ) async throws -> (holder: ReceiptsdProcess, other: ReceiptsdProcess) {
        let counts = [try await Self.delivering(one), try await Self.delivering(other)]
        try #require(counts.sorted() == [0, 1])
        return counts[0] == 1 ? (one, other) : (other, one)
    }

    @Test("two instances on one database: each batch is delivered by one of them; killing it moves delivery to the other within 30 s")
    func twoInstances() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await Self.withTwoInstances(receiver: receiver, chats: 4) { one, other, apiKey in
            // Writes through both instances.
            try await Self.write(100, chats: 4, through: one, apiKey: apiKey)
            try await Self.write(100, chats: 4, through: other, apiKey: apiKey)
            let delivered = await receiver.waitForEvents(200)
            #expect(delivered.count == 200)
            // Each batch went out once: no event came twice.
            #expect(receiver.eventIds.count == 200)

            let (holder, survivor) = try await Self.holder(of: one, other)
            holder.kill()
            let killed = ContinuousClock.now
            try await Self.write(50, chats: 4, through: survivor, apiKey: apiKey)
            let all = await receiver.waitForEvents(250, within: .seconds(30))
            #expect(ContinuousClock.now - killed < .seconds(30))
            #expect(all == (try await Self.streamIds(on: survivor, apiKey: apiKey, count: 250)))
            #expect(try await Self.delivering(survivor) == 1)
        }
    }

    @Test("a replay asked of the instance that does not deliver: the one that does starts again from there, in order, though it had a batch out when the replay came")
    func replayAcrossInstances() async throws {
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await Self.withTwoInstances(receiver: receiver, chats: 2) { one, other, apiKey in
            try await Self.write(100, chats: 2, through: one, apiKey: apiKey)
            let delivered = await receiver.waitForEvents(100)
            try #require(delivered.count == 100)
            let (holder, bystander) = try await Self.holder(of: one, other)

            // The holder has a batch out, answered only after the holder's next lease renewal
            // (every 1.1 s with 11 s leases) has seen the replay.
            receiver.script([.delayed(.seconds(4))])
            try await Self.write(1, chats: 1, through: holder, apiKey: apiKey)
            let outstanding = await receiver.wait { $0.flatMap(\.eventIds).count > 100 }
            let before = outstanding.count
            let newest = try #require(outstanding.last?.eventIds.last)
            let replay = try await Self.send(
                .POST, bystander.baseURL + "/v1/webhooks/hook/replay", as: apiKey, json: #"{"after":"\#(delivered[49])"}"#)
            #expect(replay.status == 202)

            // From the event after the replayed one to the newest, once, in order; then on.
            let expected = Array(delivered[50...]) + [newest]
            let again = await receiver.wait(within: .seconds(20)) { $0.dropFirst(before).flatMap(\.eventIds).count >= expected.count }
            let replayed = again.dropFirst(before)
            #expect(replayed.flatMap(\.eventIds) == expected)
            #expect(replayed.compactMap { $0.headers["webhook-id"] }.allSatisfy { $0.hasSuffix("_r1") })
            try await Self.write(1, chats: 1, through: bystander, apiKey: apiKey)
            let all = try await Self.streamIds(on: bystander, apiKey: apiKey, count: 102)
            let after = await receiver.wait { $0.dropFirst(before).flatMap(\.eventIds).count >= expected.count + 1 }
            #expect(after.dropFirst(before).flatMap(\.eventIds) == expected + [all[101]])
            #expect(try await Self.delivering(one) + Self.delivering(other) == 1)
        }
    }
}
