import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import HTTPTypes
import Postgres
import ReceiptsServer
import TestSupport
import Testing

/// Fairness between tenants, from outside: one tenant's stuck or flooding work never holds
/// another's requests, a tenant over its bounds is answered 429 with `Retry-After` and
/// nothing of its request is done, and the rate limits an operator sets (admin API or psql)
/// reach the answers' `RateLimit` fields.
@Suite("Fairness between tenants")
struct FairnessTests {
    /// Holds the rows of `tenant`'s chats locked in an open transaction, as a psql session
    /// might: the tenant's writes to them wait until `release()`.
    final class ChatLock: Sendable {
        let holder: PostgresConnection

        init(tenant: String) async throws {
            self.holder = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
            try await self.holder.executeScript("BEGIN")
            for table in ["chats", "chat_members", "messages"] {
                // Table names from the list above, not values.
                try await self.holder.query("SELECT 1 FROM receipts.\(table) WHERE tenant_id = $1 FOR UPDATE", [tenant])
            }
        }

        func release() async throws {
            try await self.holder.executeScript("ROLLBACK")
            await self.holder.close()
        }
    }

    /// A request on a connection of its own (the test client's requests follow each other on
    /// one), for requests that must be under way together; returns the status.
    static func concurrentRequest(_ method: NIOHTTP1.HTTPMethod, _ path: String, as apiKey: String, json: [String: Any], port: Int) async throws -> Int {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(apiKey)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(try JSONSerialization.data(withJSONObject: json))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        return Int(response.status.code)
    }

    /// Waits until the pool has at least `count` leases waiting (`/metrics`), so that a test
    /// knows the noisy tenant's line has formed before it asks for more.
    static func waitForWaitingLeases(_ count: Int, client: APIClient) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let metrics = try await client.request(.get, "/metrics", as: nil)
            let line = metrics.body.split(separator: "\n").first { $0.hasPrefix("receipts_db_pool_waiting_leases ") }
            if let line, let value = Double(line.split(separator: " ").last ?? ""), Int(value) >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("the pool never had \(count) leases waiting")
    }

    @Test("a quiet tenant's request is served at once while another tenant's requests hold their share of the pool and queue behind it")
    func quietServedAheadOfNoisyQueue() async throws {
        try await TestService.run(configure: { configuration in
            configuration.databasePoolSize = 2
            configuration.fairness.sharedConnections = 2
            // The stuck requests wait for the lock through the test's steps, not 503 at 5 s.
            configuration.databaseTimeout = .seconds(60)
        }) { client in
            let noisy = try await client.createTenant(name: "noisy")
            let quiet = try await client.createTenant(name: "quiet")
            for chat in 0..<3 { try await noisy.createChat("n\(chat)", members: ["a", "b"]) }
            try await quiet.createChat("q", members: ["a", "b"])
            let message = try await quiet.send(in: "q", from: "a")

            // The noisy tenant's joins wait for the lock: one holds a connection, the others
            // wait in the noisy tenant's line.
            let lock = try await ChatLock(tenant: noisy.id)
            let noisyJoins = Task {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for chat in 0..<3 {
                        group.addTask {
                            try await Self.concurrentRequest(.POST, "/v1/chats/n\(chat)/members", as: noisy.apiKey, json: ["userId": "c"], port: client.port)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            try await Self.waitForWaitingLeases(2, client: client)

            // With the noisy tenant stuck, the quiet tenant still reads, sends and marks.
            let unread = try await client.request(.get, "/v1/users/b/unread", as: quiet.apiKey)
            #expect(unread.status == .ok)
            let read = try await quiet.read(in: "q", by: "b", ["messageIds": [message]])
            #expect(read.marked == 1)
            _ = try await quiet.send(in: "q", from: "b")

            try await lock.release()
            let statuses = try await noisyJoins.value
            #expect(statuses.allSatisfy { $0 == 200 || $0 == 201 }, "the noisy tenant's joins answered \(statuses)")
        }
    }

    @Test("a tenant at its most requests in flight is answered 429 with Retry-After, nothing of the request is done, and other tenants go on")
    func tenantLineBounded() async throws {
        try await TestService.run(configure: { configuration in
            configuration.fairness.tenantMaximum = 1
            // The stuck request waits for the lock through the test's steps, not 503 at 5 s.
            configuration.databaseTimeout = .seconds(60)
        }) { client in
            let noisy = try await client.createTenant(name: "noisy")
            let quiet = try await client.createTenant(name: "quiet")
            try await noisy.createChat("n", members: ["a", "b"])
            try await quiet.createChat("q", members: ["a", "b"])

            let lock = try await ChatLock(tenant: noisy.id)
            let stuck = Task { try await Self.concurrentRequest(.POST, "/v1/chats/n/members", as: noisy.apiKey, json: ["userId": "c"], port: client.port) }
            try await Self.waitForRequestInFlight(of: noisy, client: client)

            let refused = try await client.request(.post, "/v1/chats/n/messages", as: noisy.apiKey, json: ["senderId": "a", "text": "too many", "id": "refused"])
            #expect(refused.status == .tooManyRequests)
            #expect(refused.errorCode == "rate_limited")
            #expect(Int(refused.headers[.retryAfter] ?? "") ?? 0 >= 1)
            // No rate limit: no RateLimit fields.
            #expect(refused.headers[HTTPField.Name("RateLimit")!] == nil)

            // The other tenant is within its share.
            #expect(try await client.request(.get, "/v1/users/a/unread", as: quiet.apiKey).status == .ok)

            try await lock.release()
            #expect(try await [200, 201].contains(stuck.value))
            // The refused send was not done.
            let messages = try await client.request(.get, "/v1/chats/n/messages?viewer=a", as: noisy.apiKey)
            #expect(messages.status == .ok)
            #expect(!messages.body.contains("refused"))
            let metrics = try await client.request(.get, "/metrics", as: nil)
            #expect(metrics.body.contains(#"receipts_tenant_refusals_total{reason="queue_full"} 1"#))
        }
    }

    @Test("while the instance is saturated, the tenant with its share in flight is answered 429 over_share and a tenant within its share is served")
    func saturatedInstanceRefusesHeaviest() async throws {
        try await TestService.run(configure: { configuration in
            configuration.fairness.saturation = 2
            // The stuck requests wait for the lock through the test's steps, not 503 at 5 s.
            configuration.databaseTimeout = .seconds(60)
        }) { client in
            let noisy = try await client.createTenant(name: "noisy")
            let quiet = try await client.createTenant(name: "quiet")
            for chat in 0..<2 { try await noisy.createChat("n\(chat)", members: ["a", "b"]) }
            try await quiet.createChat("q", members: ["a", "b"])

            let lock = try await ChatLock(tenant: noisy.id)
            let stuck = (0..<2).map { chat in
                Task { try await Self.concurrentRequest(.POST, "/v1/chats/n\(chat)/members", as: noisy.apiKey, json: ["userId": "c"], port: client.port) }
            }
            try await Self.waitForRequestsInFlight(2, client: client)

            let refused = try await client.request(.post, "/v1/chats/n0/messages", as: noisy.apiKey, json: ["senderId": "a", "text": "over", "id": "refused"])
            #expect(refused.status == .tooManyRequests)
            #expect(refused.errorCode == "rate_limited")
            #expect(Int(refused.headers[.retryAfter] ?? "") ?? 0 >= 1)
            // The quiet tenant has nothing in flight: within its share, though the instance is saturated.
            #expect(try await client.request(.post, "/v1/chats/q/messages", as: quiet.apiKey, json: ["senderId": "a", "text": "hi"]).status == .created)

            try await lock.release()
            for request in stuck { #expect(try await [200, 201].contains(request.value)) }
            let messages = try await client.request(.get, "/v1/chats/n0/messages?viewer=a", as: noisy.apiKey)
            #expect(!messages.body.contains("refused"))
            let metrics = try await client.request(.get, "/metrics", as: nil)
            #expect(metrics.body.contains(#"receipts_tenant_refusals_total{reason="over_share"} 1"#))
        }
    }

    /// Waits until `tenant` has a request under way (`/metrics`: requests in flight).
    static func waitForRequestInFlight(of tenant: TestTenant, client: APIClient) async throws {
        try await Self.waitForRequestsInFlight(1, client: client)
    }

    /// Waits until `count` requests are under way (`/metrics`: requests in flight).
    static func waitForRequestsInFlight(_ count: Int, client: APIClient) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let metrics = try await client.request(.get, "/metrics", as: nil)
            if metrics.body.split(separator: "\n").contains(where: { $0 == "receipts_tenant_requests_in_flight \(count)" || $0 == "receipts_tenant_requests_in_flight \(count).0" }) {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let metrics = try await client.request(.get, "/metrics", as: nil)
        Issue.record("\(count) requests never got under way: \(metrics.body.split(separator: "\n").filter { $0.contains("in_flight") || $0.contains("pool") })")
    }

    @Test("a tenant's rate limit: the burst passes, the next request is 429 with Retry-After, and every answer carries RateLimit-Policy and RateLimit")
    func rateLimit() async throws {
        try await TestService.run { client in
            let limited = try await client.createTenant(name: "limited")
            let other = try await client.createTenant(name: "other")
            let set = try await client.request(
                .put, "/admin/v1/tenants/\(limited.id)/limits", as: TestService.adminToken, json: ["requestsPerSecond": 1, "burst": 2])
            #expect(set.status == .ok)
            #expect(set.json["requestsPerSecond"] as? Int == 1)
            #expect(set.json["burst"] as? Int == 2)
            #expect(set.json["source"] as? String == "tenant")

            let policy = HTTPField.Name("RateLimit-Policy")!
            let state = HTTPField.Name("RateLimit")!
            let first = try await client.request(.get, "/v1/users/a/unread", as: limited.apiKey)
            #expect(first.status == .ok)
            #expect(first.headers[policy] == #""tenant";q=2;w=2"#)
            #expect(first.headers[state] == #""tenant";r=1;t=1"#)
            // The bucket refills one token a second: on a machine slow enough that a request
            // takes a second, a refusal comes a request or two later. At most ten.
            var answers: [APIResponse] = []
            for attempt in 0..<10 {
                let answer = try await client.request(
                    .put, "/v1/chats/c\(attempt)", as: limited.apiKey, json: ["kind": "group", "members": ["a", "b"]])
                answers.append(answer)
                if answer.status == .tooManyRequests { break }
            }
            let second = try #require(answers.dropLast().last, "the first request after the first was refused")
            #expect(second.status == .created)
            #expect(second.headers[state]?.hasPrefix(#""tenant";r=0;"#) == true)
            let third = try #require(answers.last)
            #expect(third.status == .tooManyRequests)
            #expect(third.errorCode == "rate_limited")
            #expect(Int(third.headers[.retryAfter] ?? "") == 1)
            #expect(third.headers[policy] == #""tenant";q=2;w=2"#)
            #expect(third.headers[state]?.hasPrefix(#""tenant";r=0;"#) == true)

            // Nothing of the refused request was done, and another tenant is not limited.
            let otherAnswer = try await client.request(.get, "/v1/users/a/unread", as: other.apiKey)
            #expect(otherAnswer.status == .ok)
            #expect(otherAnswer.headers[policy] == nil)
            try await Task.sleep(for: .milliseconds(1100))
            let chat = try await client.request(.get, "/v1/chats/c\(answers.count - 1)", as: limited.apiKey)
            #expect(chat.status == .notFound)
        }
    }

    @Test("limits through the admin API: the default, a limit of the tenant's own, back to the default; bad values are 400, unknown tenants 404")
    func adminLimits() async throws {
        try await TestService.run(configure: { $0.fairness.defaultRequestsPerSecond = 500 }) { client in
            let tenant = try await client.createTenant()
            let path = "/admin/v1/tenants/\(tenant.id)/limits"
            let initial = try await client.request(.get, path, as: TestService.adminToken)
            #expect(initial.status == .ok)
            #expect(initial.json["tenantId"] as? String == tenant.id)
            #expect(initial.json["requestsPerSecond"] as? Int == 500)
            #expect(initial.json["burst"] as? Int == 500)
            #expect(initial.json["source"] as? String == "default")

            let own = try await client.request(.put, path, as: TestService.adminToken, json: ["requestsPerSecond": 20])
            #expect(own.json["requestsPerSecond"] as? Int == 20)
            #expect(own.json["burst"] as? Int == 20)
            #expect(own.json["source"] as? String == "tenant")
            #expect(try await client.request(.get, path, as: TestService.adminToken).json["requestsPerSecond"] as? Int == 20)

            let back = try await client.request(.put, path, as: TestService.adminToken, body: #"{"requestsPerSecond":null,"burst":null}"#)
            #expect(back.json["requestsPerSecond"] as? Int == 500)
            #expect(back.json["source"] as? String == "default")

            for bad in [#"{"requestsPerSecond":0}"#, #"{"burst":1000001}"#, #"{"requestsPerSecond":"ten"}"#, #"{"requestsPerSecond":1.5}"#, #"{"rate":1}"#, "[]"] {
                let answer = try await client.request(.put, path, as: TestService.adminToken, body: bad)
                #expect(answer.status == .badRequest, "\(bad) answered \(answer.status)")
                #expect(answer.errorCode == "invalid_request")
            }
            #expect(try await client.request(.get, path, as: TestService.adminToken).json["source"] as? String == "default")

            #expect(try await client.request(.get, "/admin/v1/tenants/no-such-tenant/limits", as: TestService.adminToken).status == .notFound)
            let unknown = try await client.request(.put, "/admin/v1/tenants/no-such-tenant/limits", as: TestService.adminToken, json: ["burst": 3])
            #expect(unknown.status == .notFound)
            #expect(try await client.request(.get, path, as: tenant.apiKey).status == .unauthorized)
        }
    }

    @Test("a limit set in psql reaches the service's answers within a few seconds, errors included")
    func limitFromPsql() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let psql = try await PostgresConnection.connect(to: TestDatabase.configuration, logger: TestDatabase.logger)
            try await psql.query("UPDATE receipts.tenants SET requests_per_second = 7, burst = 9 WHERE tenant_id = $1", [tenant.id])
            await psql.close()
            let deadline = ContinuousClock.now + .seconds(10)
            var policy: String?
            while ContinuousClock.now < deadline {
                policy = try await client.request(.get, "/v1/users/a/unread", as: tenant.apiKey).headers[HTTPField.Name("RateLimit-Policy")!]
                if policy != nil { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(policy == #""tenant";q=9;w=2"#)
            // Errors carry the fields too, a malformed body's 400 among them.
            let malformed = try await client.request(.put, "/v1/chats/c", as: tenant.apiKey, body: "{")
            #expect(malformed.status == .badRequest)
            #expect(malformed.headers[HTTPField.Name("RateLimit-Policy")!] == #""tenant";q=9;w=2"#)
        }
    }
}
