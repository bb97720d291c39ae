import DequeModule
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

    init(baseURL: String) throws {
        guard let url = URL(string: baseURL), url.scheme == "http", let host = url.host, let port = url.port else {
            throw BenchFailure("the service URL must look like http://host:port, not \(baseURL)")
        }
        self.baseURL = baseURL
        self.host = host
        self.port = port
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

    /// A connection of the caller's own whose answers keep their `Retry-After`: for a
    /// client that must back off when refused (the fairness scenario's flood).
    func openStatusConnection() async throws -> StatusConnection {
        try await StatusConnection.connect(host: self.host, port: self.port)
    }

    /// Sends a request on `connection` and returns its status and `Retry-After` whatever the
    /// status (the body is dropped unread). Throws only when the connection fails.
    func send(
        _ method: HTTPMethod, _ path: String, as credential: String?, body: [String: Any]? = nil, on connection: StatusConnection
    ) async throws -> StatusConnection.Answer {
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
        return try await LoopbackConnection.connect(host: self.host, port: self.port)
    }
}

/// One keep-alive HTTP/1.1 connection whose answers are the status and `Retry-After`, the
/// body dropped as it arrives: `LoopbackConnection`'s answers keep no headers, and a client
/// that floods the service should not spend the CPU it shares with it on bodies it does not
/// read.
final class StatusConnection: Sendable {
    struct Answer: Sendable {
        let status: Int
        /// The `Retry-After` header, as sent.
        let retryAfter: String?
    }

    private let channel: any Channel

    private init(channel: any Channel) {
        self.channel = channel
    }

    fileprivate static func connect(host: String, port: Int) async throws -> StatusConnection {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(enableOutboundHeaderValidation: false)
                    try channel.pipeline.syncOperations.addHandler(StatusHandler())
                }
            }
            .connect(host: host, port: port)
            .get()
        return StatusConnection(channel: channel)
    }

    var isActive: Bool { self.channel.isActive }

    fileprivate func exchange(_ head: HTTPRequestHead, body: ByteBuffer?) async throws -> Answer {
        let answer = self.channel.eventLoop.makePromise(of: Answer.self)
        self.channel.writeAndFlush(StatusHandler.Request(head: head, body: body, answer: answer), promise: nil)
        return try await answer.futureResult.get()
    }

    func close() async {
        try? await self.channel.close()
    }
}

/// Writes each request's parts and completes its promise with the answer's status and
/// `Retry-After`, in order.
private final class StatusHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = Request
    typealias OutboundOut = HTTPClientRequestPart

    struct Request: Sendable {
        var head: HTTPRequestHead
        var body: ByteBuffer?
        var answer: EventLoopPromise<StatusConnection.Answer>
    }

    private var waiting: Deque<EventLoopPromise<StatusConnection.Answer>> = []
    private var answer = StatusConnection.Answer(status: 0, retryAfter: nil)

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = self.unwrapOutboundIn(data)
        self.waiting.append(request.answer)
        context.write(self.wrapOutboundOut(.head(request.head)), promise: nil)
        if let body = request.body { context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.write(self.wrapOutboundOut(.end(nil)), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.answer = StatusConnection.Answer(status: Int(head.status.code), retryAfter: head.headers.first(name: "Retry-After"))
        case .body:
            break
        case .end:
            self.waiting.popFirst()?.succeed(self.answer)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.failAll(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.failAll(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    private func failAll(_ error: any Error) {
        while let answer = self.waiting.popFirst() { answer.fail(error) }
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
