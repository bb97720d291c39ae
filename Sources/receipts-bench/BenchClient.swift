import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// HTTP on loopback, with enough connections for the benchmark's concurrency.
struct BenchClient: Sendable {
    let baseURL: String
    let http: HTTPClient

    init(baseURL: String, concurrency: Int) {
        self.baseURL = baseURL
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(8, concurrency * 2))
        self.http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    func shutdown() async throws { try await self.http.shutdown() }

    /// Sends a request; returns the status and body.
    func send(_ method: HTTPMethod, _ path: String, as credential: String?, body: [String: Any]?) async throws -> (Int, Data) {
        var request = HTTPClientRequest(url: self.baseURL + path)
        request.method = method
        if let credential { request.headers.add(name: "Authorization", value: "Bearer \(credential)") }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        }
        let response = try await self.http.execute(request, timeout: .seconds(60))
        let data = try await response.body.collect(upTo: 16 << 20)
        return (Int(response.status.code), Data(data.readableBytesView))
    }

    /// Sends and expects `status`; returns the JSON object answered.
    @discardableResult
    func expect(_ status: Int, _ method: HTTPMethod, _ path: String, as credential: String?, body: [String: Any]? = nil) async throws -> [String: Any] {
        let (got, data) = try await self.send(method, path, as: credential, body: body)
        guard got == status else {
            throw BenchFailure("\(method) \(path): expected \(status), got \(got): \(String(decoding: data, as: UTF8.self))")
        }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    /// A new tenant: its id and API key.
    func createTenant(adminToken: String) async throws -> (id: String, apiKey: String) {
        let tenant = try await self.expect(201, .POST, "/admin/v1/tenants", as: adminToken, body: ["name": "bench"])
        return (tenant["id"] as! String, tenant["apiKey"] as! String)
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
