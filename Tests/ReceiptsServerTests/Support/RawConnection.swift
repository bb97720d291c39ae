import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A plain TCP connection to the service, for what HTTP clients will not send: half-sent
/// heads, malformed lines, bodies chunked by hand, heads whose body never follows.
final class RawConnection: Sendable {
    /// An answer as read off the socket.
    struct Answer {
        let status: Int
        let headers: [(String, String)]
        let body: String

        func header(_ name: String) -> String? {
            self.headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }

        /// The `error.code` of an error answer.
        var errorCode: String? {
            let json = (try? JSONSerialization.jsonObject(with: Data(self.body.utf8))) as? [String: Any]
            return (json?["error"] as? [String: Any])?["code"] as? String
        }
    }

    private let channel: any Channel
    private let received: NIOLockedValueBox<[UInt8]>

    private init(channel: any Channel, received: NIOLockedValueBox<[UInt8]>) {
        self.channel = channel
        self.received = received
    }

    static func open(port: Int) async throws -> RawConnection {
        let received = NIOLockedValueBox([UInt8]())
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Collector(received: received))
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        return RawConnection(channel: channel, received: received)
    }

    func send(_ text: String) async throws {
        try await self.send(ByteBuffer(string: text))
    }

    func send(_ bytes: ByteBuffer) async throws {
        try await self.channel.writeAndFlush(bytes)
    }

    /// Whether the server has closed the connection.
    var isClosed: Bool { !self.channel.isActive }

    /// Waits until the server closes the connection; false if it is still open after `limit`.
    func waitUntilClosed(within limit: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while !self.isClosed, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        return self.isClosed
    }

    /// The next complete answer (head and `Content-Length` body), taken off what was
    /// received; nil if none is complete within `limit`.
    func answer(within limit: Duration = .seconds(5)) async throws -> Answer? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let answer = self.received.withLockedValue(Self.takeAnswer) { return answer }
            if self.isClosed { return self.received.withLockedValue(Self.takeAnswer) }
            try await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    /// Everything received and not yet taken as an answer.
    var pendingText: String {
        self.received.withLockedValue { String(decoding: $0, as: UTF8.self) }
    }

    /// Waits until what was received contains `text`; false if it does not within `limit`.
    func waitUntilReceived(_ text: String, within limit: Duration = .seconds(5)) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while !self.pendingText.contains(text), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        return self.pendingText.contains(text)
    }

    func close() {
        self.channel.close(promise: nil)
    }

    private static func takeAnswer(from bytes: inout [UInt8]) -> Answer? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let headEnd = bytes.firstRange(of: separator) else { return nil }
        let lines = String(decoding: bytes[..<headEnd.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
        let headers = lines.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
        guard bytes.count >= headEnd.upperBound + length else { return nil }
        let body = String(decoding: bytes[headEnd.upperBound..<(headEnd.upperBound + length)], as: UTF8.self)
        bytes.removeFirst(headEnd.upperBound + length)
        return Answer(status: status, headers: headers, body: body)
    }

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let received: NIOLockedValueBox<[UInt8]>

        init(received: NIOLockedValueBox<[UInt8]>) {
            self.received = received
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = Self.unwrapInboundIn(data)
            self.received.withLockedValue { $0.append(contentsOf: buffer.readableBytesView) }
        }
    }
}

extension APIClient {
    /// Sends one request on a connection of its own, closed afterwards: for answers after
    /// which the service closes the connection (the test client does not reconnect).
    func requestOnNewConnection(_ method: HTTPRequest.Method, _ path: String, as credential: String, body: String) async throws -> APIResponse {
        let connection = try await RawConnection.open(port: self.port)
        defer { connection.close() }
        try await connection.send(
            "\(method.rawValue) \(path) HTTP/1.1\r\nHost: receipts\r\nAuthorization: Bearer \(credential)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        )
        guard let answer = try await connection.answer(within: .seconds(10)) else {
            throw NoAnswer(received: connection.pendingText)
        }
        return APIResponse(status: HTTPResponse.Status(code: answer.status), body: answer.body, contentType: answer.header("content-type"))
    }

    struct NoAnswer: Error {
        let received: String
    }
}
