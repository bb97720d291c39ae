import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// HTTP on loopback: keep-alive connections, each used by one request at a time, opened as
/// the concurrency asks and kept for the next request.
final class BenchClient: Sendable {
    let baseURL: String
    private let host: String
    private let port: Int
    private let idle = NIOLockedValueBox<[LoopbackConnection]>([])
    /// The event loops its connections are read on.
    private let group: any EventLoopGroup

    init(baseURL: String, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws {
        guard let url = URL(string: baseURL), url.scheme == "http", let host = url.host, let port = url.port else {
            throw BenchFailure("the service URL must look like http://host:port, not \(baseURL)")
        }
        self.baseURL = baseURL
        self.host = host
        self.port = port
        self.group = group
    }

    func shutdown() async {
        for connection in self.idle.withLockedValue({ idle in defer { idle.removeAll() }; return idle }) {
            await connection.close()
        }
    }

    /// Sends a request; returns the status and body.
    func send(_ method: HTTPMethod, _ path: String, as credential: String?, body: [String: Any]?) async throws -> (Int, Data) {
        let (head, bytes) = try self.request(method, path, as: credential, body: body)
        let connection = try await self.takeConnection()
        let answer = try await connection.exchange(head, body: bytes)
        if connection.isActive { self.idle.withLockedValue { $0.append(connection) } }
        return (answer.status, Data(answer.body.readableBytesView))
    }

    /// An answer with its headers (`exchange`).
    struct Answer {
        let status: Int
        let headers: HTTPHeaders
        let body: Data
    }

    /// Sends a request with `headers` besides the bench's own, and returns the answer with its
    /// headers: for figures that read what the service says in them (the replicas scenario's
    /// `Receipts-Consistency-Token` and `Receipts-Read-Source`).
    func exchange(
        _ method: HTTPMethod, _ path: String, as credential: String?, body: [String: Any]? = nil, headers: [(String, String)] = []
    ) async throws -> Answer {
        var (head, bytes) = try self.request(method, path, as: credential, body: body)
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        let connection = try await self.takeConnection()
        let answer = try await connection.exchange(head, body: bytes)
        if connection.isActive { self.idle.withLockedValue { $0.append(connection) } }
        return Answer(status: answer.status, headers: answer.headers, body: Data(answer.body.readableBytesView))
    }

    /// A request's head and body as the bench sends them.
    private func request(
        _ method: HTTPMethod, _ path: String, as credential: String?, body: [String: Any]?
    ) throws -> (HTTPRequestHead, ByteBuffer?) {
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
        head.headers.add(name: "Host", value: self.host)
        if let credential { head.headers.add(name: "Authorization", value: "Bearer \(credential)") }
        var bytes: ByteBuffer?
        if let body {
            var buffer = ByteBuffer()
            try BenchJSON.write(body, into: &buffer)
            head.headers.add(name: "Content-Type", value: "application/json")
            head.headers.add(name: "Content-Length", value: String(buffer.readableBytes))
            bytes = buffer
        } else if method != .GET {
            head.headers.add(name: "Content-Length", value: "0")
        }
        return (head, bytes)
    }

    /// A connection of the caller's own that drops the answers' bodies (their status and
    /// `Retry-After` kept): for a client that floods the service and must back off when
    /// refused (the fairness scenario's flood).
    func openStatusConnection() async throws -> LoopbackConnection {
        try await LoopbackConnection.connect(host: self.host, port: self.port, keepsBodies: false, group: self.group)
    }

    /// Sends a request on `connection` and returns its status and `Retry-After` whatever the
    /// status (the body is dropped unread). Throws only when the connection fails.
    func send(
        _ method: HTTPMethod, _ path: String, as credential: String?, body: [String: Any]? = nil, on connection: LoopbackConnection
    ) async throws -> LoopbackConnection.Answer {
        let (head, bytes) = try self.request(method, path, as: credential, body: body)
        return try await connection.exchange(head, body: bytes)
    }

    /// Sends and expects `status`; returns the JSON object answered.
    @discardableResult
    func expect(_ status: Int, _ method: HTTPMethod, _ path: String, as credential: String?, body: [String: Any]? = nil) async throws -> [String: Any] {
        let data = try await self.check(status, method, path, as: credential, body: body)
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    /// Sends and expects `status`; returns the body unparsed. (Parsing each answer was a
    /// tenth of the bench's CPU in the throughput figures, which only need the status.)
    @discardableResult
    func check(_ status: Int, _ method: HTTPMethod, _ path: String, as credential: String?, body: [String: Any]? = nil) async throws -> Data {
        let (got, data) = try await self.send(method, path, as: credential, body: body)
        guard got == status else {
            throw BenchFailure("\(method) \(path): expected \(status), got \(got): \(String(decoding: data, as: UTF8.self))")
        }
        return data
    }

    /// A new tenant: its id and API key.
    func createTenant(adminToken: String, name: String = "bench") async throws -> (id: String, apiKey: String) {
        let tenant = try await self.expect(201, .POST, "/admin/v1/tenants", as: adminToken, body: ["name": name])
        return (tenant["id"] as! String, tenant["apiKey"] as! String)
    }

    /// An idle connection that is still open, else a new one.
    private func takeConnection() async throws -> LoopbackConnection {
        while let connection = self.idle.withLockedValue({ $0.popLast() }) {
            if connection.isActive { return connection }
            await connection.close()
        }
        return try await LoopbackConnection.connect(host: self.host, port: self.port, group: self.group)
    }
}

/// JSON for the bench's request bodies: strings, integers, booleans, arrays and objects.
/// (Foundation's `JSONSerialization` was a seventh of the bench's CPU in the throughput figures.)
enum BenchJSON {
    static func write(_ value: Any, into buffer: inout ByteBuffer) throws {
        switch value {
        case let string as String:
            self.write(string: string, into: &buffer)
        case let bool as Bool:
            buffer.writeString(bool ? "true" : "false")
        case let int as Int:
            buffer.writeString(String(int))
        case let array as [Any]:
            buffer.writeInteger(UInt8(ascii: "["))
            for (index, element) in array.enumerated() {
                if index > 0 { buffer.writeInteger(UInt8(ascii: ",")) }
                try self.write(element, into: &buffer)
            }
            buffer.writeInteger(UInt8(ascii: "]"))
        case let object as [String: Any]:
            buffer.writeInteger(UInt8(ascii: "{"))
            for (index, (key, element)) in object.enumerated() {
                if index > 0 { buffer.writeInteger(UInt8(ascii: ",")) }
                self.write(string: key, into: &buffer)
                buffer.writeInteger(UInt8(ascii: ":"))
                try self.write(element, into: &buffer)
            }
            buffer.writeInteger(UInt8(ascii: "}"))
        default:
            throw BenchFailure("the bench cannot write \(type(of: value)) as JSON")
        }
    }

    private static func write(string: String, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                buffer.writeInteger(UInt8(ascii: "\\"))
                buffer.writeInteger(byte)
            case 0..<0x20:
                buffer.writeString(String(format: "\\u%04x", byte))
            default:
                buffer.writeInteger(byte)
            }
        }
        buffer.writeInteger(UInt8(ascii: "\""))
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
