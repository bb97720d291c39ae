import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

@Suite("Graceful shutdown")
struct GracefulShutdownTests {
    @Test("on SIGTERM, receiptsd closes its open streams and exits within seconds")
    func sigterm() async throws {
        try await TestDatabase.ensureMigrated()
        let adminToken = TestDatabase.uniqueName("admin")
        let service = try await ReceiptsdProcess.start(
            arguments: ["--no-migrate"],
            environment: ["DATABASE_URL": TestDatabase.url, "RECEIPTS_ADMIN_TOKEN": adminToken, "LOG_LEVEL": "error"]
        )
        defer { service.kill() }
        let process = service.process
        let port = service.port
        let base = service.baseURL
        let apiKey = try #require(try await Self.send(.POST, base + "/admin/v1/tenants", as: adminToken, json: #"{"name":"shutdown"}"#)["apiKey"] as? String)
        _ = try await Self.send(.PUT, base + "/v1/chats/g", as: apiKey, json: #"{"kind":"group","members":["a","b"]}"#)

        try await StreamClients.withWebSocket(port: port, credential: apiKey) { stream, _ in
            // The stream is live...
            _ = try await Self.send(.POST, base + "/v1/chats/g/messages", as: apiKey, json: #"{"senderId":"a","text":"hi"}"#)
            #expect((await stream.next())?["type"] as? String == "message.created")
            // ...until the signal.
            let signalled = ContinuousClock.now
            kill(process.processIdentifier, SIGTERM)
            // The server ends the stream itself: nothing arrives, and the reader finishes early.
            #expect(await stream.next(within: .seconds(15)) == nil)
            #expect(ContinuousClock.now - signalled < .seconds(10))
            while process.isRunning, ContinuousClock.now - signalled < .seconds(15) {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(!process.isRunning, "receiptsd still runs 15 s after SIGTERM")
            #expect(process.terminationStatus == 0)
        }
    }

    /// Sends a JSON request and returns the JSON object answered.
    static func send(_ method: HTTPMethod, _ url: String, as credential: String, json: String) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(credential)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: json))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 16)
        return (try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]) ?? [:]
    }
}
