import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

/// Slow and broken clients against the built `receiptsd`, with its default timeouts: the
/// point is the socket and the process.
@Suite("receiptsd connections")
struct ReceiptsdConnectionTests {
    @Test("receiptsd closes a half-sent head after 10 s, answers a malformed one 400, and keeps serving")
    func defaultHeadTimeout() async throws {
        try await TestDatabase.ensureMigrated()
        let service = try await ReceiptsdProcess.start(
            arguments: ["--no-migrate"],
            environment: ["DATABASE_URL": TestDatabase.url, "LOG_LEVEL": "error"]
        )
        defer { service.kill() }

        let stuck = try await RawConnection.open(port: service.port)
        let opened = ContinuousClock.now
        try await stuck.send("POST /v1/chats/g/messages HTTP/1.1\r\nHost: receipts\r\nContent-Type: applic")

        let malformed = try await RawConnection.open(port: service.port)
        try await malformed.send("GET /healthz HTTP/1.1\r\nHost: receipts\r\nno colon here\r\n\r\n")
        let answer = try await malformed.answer()
        #expect(answer?.status == 400)
        #expect(answer?.errorCode == "invalid_request")
        #expect(try await malformed.waitUntilClosed(within: .seconds(2)))

        let notHTTP = try await RawConnection.open(port: service.port)
        try await notHTTP.send("HELLO\r\n\r\n")
        #expect(try await notHTTP.answer()?.status == 400)
        #expect(try await notHTTP.waitUntilClosed(within: .seconds(2)))

        // Meanwhile the service answers as usual.
        let asked = ContinuousClock.now
        let health = try await HTTPClient.shared.execute(HTTPClientRequest(url: service.baseURL + "/healthz"), timeout: .seconds(2))
        #expect(health.status == .ok)
        #expect(ContinuousClock.now - asked < .seconds(2), "the service took \(ContinuousClock.now - asked) to answer beside a stuck connection")

        try await Task.sleep(until: opened + .seconds(9))
        #expect(!stuck.isClosed, "closed before 9 s")
        #expect(try await stuck.waitUntilClosed(within: .seconds(3)), "a half-sent head still open 12 s on")
    }

    @Test("with 200 stuck connections and a request stuck in flight, SIGTERM makes receiptsd exit within its grace period")
    func sigtermWithStuckConnections() async throws {
        try await TestDatabase.ensureMigrated()
        let adminToken = TestDatabase.uniqueName("admin")
        let service = try await ReceiptsdProcess.start(
            arguments: ["--no-migrate"],
            environment: [
                "DATABASE_URL": TestDatabase.url, "RECEIPTS_ADMIN_TOKEN": adminToken, "LOG_LEVEL": "error",
                "RECEIPTS_SHUTDOWN_GRACE_SECONDS": "3",
            ]
        )
        defer { service.kill() }
        let apiKey = try #require(
            try await GracefulShutdownTests.send(.POST, service.baseURL + "/admin/v1/tenants", as: adminToken, json: #"{"name":"stuck"}"#)["apiKey"] as? String
        )
        _ = try await GracefulShutdownTests.send(.PUT, service.baseURL + "/v1/chats/g", as: apiKey, json: #"{"kind":"group","members":["a","b"]}"#)

        var connections: [RawConnection] = []
        defer { connections.forEach { $0.close() } }
        for index in 0..<200 {
            let connection = try await RawConnection.open(port: service.port)
            if index.isMultiple(of: 2) {
                // Half-sent heads.
                try await connection.send("GET /v1/chats/g HTTP/1.1\r\nHost: receipts\r\nAuthori")
            } else {
                // Idle keep-alives, after one request each.
                try await connection.send("GET /healthz HTTP/1.1\r\nHost: receipts\r\n\r\n")
            }
            connections.append(connection)
        }
        for connection in connections.enumerated().filter({ !$0.offset.isMultiple(of: 2) }).map(\.element) {
            #expect(try await connection.answer()?.status == 200)
        }
        // A request in flight that never completes: its body stops half-way.
        let inFlight = try await RawConnection.open(port: service.port)
        connections.append(inFlight)
        try await inFlight.send(
            "POST /v1/chats/g/messages HTTP/1.1\r\nHost: receipts\r\nAuthorization: Bearer \(apiKey)\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"senderId\":"
        )
        // And an open stream.
        let stream = try await RawConnection.open(port: service.port)
        connections.append(stream)
        try await stream.send("GET /v1/events HTTP/1.1\r\nHost: receipts\r\nAuthorization: Bearer \(apiKey)\r\n\r\n")
        try await Task.sleep(for: .milliseconds(300))

        let signalled = ContinuousClock.now
        kill(service.process.processIdentifier, SIGTERM)
        // It stops accepting at once.
        try await Task.sleep(for: .milliseconds(200))
        #expect(await (try? RawConnection.open(port: service.port)) == nil, "a connection accepted after SIGTERM")
        while service.process.isRunning, ContinuousClock.now - signalled < .seconds(10) {
            try await Task.sleep(for: .milliseconds(20))
        }
        let exitedAfter = ContinuousClock.now - signalled
        #expect(!service.process.isRunning, "receiptsd still runs 10 s after SIGTERM")
        #expect(exitedAfter < .seconds(3) + .milliseconds(1500), "exited \(exitedAfter) after SIGTERM, grace period 3 s")
        #expect(connections.allSatisfy(\.isClosed) || !service.process.isRunning)
    }
}
