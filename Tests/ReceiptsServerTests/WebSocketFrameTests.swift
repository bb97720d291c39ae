import Foundation
import NIOConcurrencyHelpers
import NIOCore
import ReceiptsServer
import TestSupport
import Testing

/// What the event stream's WebSocket does with the client's frames, seen on the wire
/// (README, "Limits, timeouts and faults"): pings, closes, messages of several frames and
/// their limit, and upgrades refused for a path that is no stream.
@Suite("WebSocket frames")
struct WebSocketFrameTests {
    @Test("a client's ping is answered with a pong of the same data; its close with a close of its code, and the connection closes")
    func pingAndClose() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let socket = try await RawUpgrade.open(port: client.port, path: "/v1/stream", credential: tenant.apiKey)
            try #require(socket.status == 101)
            let frames = ServerFrames(socket)
            try await socket.send(opcode: 0x9, payload: Array("are you there".utf8))
            let pong = try #require(await frames.next())
            #expect(pong.opcode == 0xA)
            #expect(pong.payload == Array("are you there".utf8))

            try await socket.send(opcode: 0x8, payload: [0x03, 0xE8] + Array("bye".utf8))  // 1000
            let close = try #require(await frames.next())
            #expect(close.opcode == 0x8)
            #expect(close.payload.prefix(2) == [0x03, 0xE8])
            #expect(await frames.isClosed(within: .seconds(5)))
        }
    }

    @Test("a delivery acknowledgement sent in three frames is recorded; a message over 1 MiB closes the socket with 1009")
    func fragmentedMessages() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("dm", kind: "direct", members: ["alice", "bob"])
            let id = try await tenant.send(in: "dm", from: "alice")
            let token = try await tenant.token(for: "bob")
            let socket = try await RawUpgrade.open(port: client.port, path: "/v1/stream", credential: token)
            try #require(socket.status == 101)
            let message = Array(#"{"type":"delivered","chatId":"dm","messageIds":["\#(id)"]}"#.utf8)
            let third = message.count / 3
            try await socket.send(opcode: 0x1, fin: false, payload: Array(message[..<third]))
            try await socket.send(opcode: 0x0, fin: false, payload: Array(message[third..<(2 * third)]))
            try await socket.send(opcode: 0x0, fin: true, payload: Array(message[(2 * third)...]))
            let deadline = ContinuousClock.now + .seconds(10)
            var deliveredTo: [String] = []
            while deliveredTo.isEmpty, ContinuousClock.now < deadline {
                deliveredTo = try await tenant.message(id, in: "dm", viewer: "alice").deliveredTo
                if deliveredTo.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(deliveredTo == ["bob"])

            // 17 frames of 63 KiB: each within the frame limit, together over 1 MiB.
            let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 63 * 1024)
            try await socket.send(opcode: 0x1, fin: false, payload: chunk)
            for index in 1..<17 {
                try await socket.send(opcode: 0x0, fin: index == 16, payload: chunk)
            }
            let frames = ServerFrames(socket)
            var close: ServerFrames.Frame?
            while close == nil, let frame = await frames.next() {
                if frame.opcode == 0x8 { close = frame }
            }
            #expect(close?.payload.prefix(2) == [0x03, 0xF1])  // 1009
            await socket.close()
        }
    }

    @Test("an upgrade of a path that is no stream is 404 with the error JSON, and closes the connection")
    func upgradeOfUnknownPath() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let answer = try await RawUpgrade.open(port: client.port, path: "/v1/streams", credential: tenant.apiKey)
            #expect(answer.status == 404, "\(answer.head)")
            #expect(answer.errorCode == "not_found", "\(answer.body)")
            #expect(answer.head.lowercased().contains("connection: close"))
            await answer.close()
        }
    }
}

/// The frames a server sent on a `RawUpgrade` after its 101 (unmasked, RFC 6455 5.2), read
/// from the bytes received so far.
private final class ServerFrames: Sendable {
    struct Frame {
        let opcode: UInt8
        let payload: [UInt8]
    }

    private let socket: RawUpgrade
    /// Bytes of the stream already taken as frames.
    private let consumed = NIOLockedValueBox(0)

    init(_ socket: RawUpgrade) {
        self.socket = socket
    }

    /// The next frame, waiting for it up to `limit`; nil when none came.
    func next(within limit: Duration = .seconds(10)) async -> Frame? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            let bytes = self.socket.receivedAfterHead
            let start = self.consumed.withLockedValue { $0 }
            if let (frame, length) = Self.frame(in: bytes[start...]) {
                self.consumed.withLockedValue { $0 = start + length }
                return frame
            }
            if self.socket.isClosed { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    /// Whether the server closed the connection within `limit`.
    func isClosed(within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while !self.socket.isClosed, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return self.socket.isClosed
    }

    private static func frame(in bytes: ArraySlice<UInt8>) -> (Frame, Int)? {
        guard bytes.count >= 2 else { return nil }
        let first = bytes.startIndex
        var length = Int(bytes[first + 1] & 0x7F)
        var header = 2
        if length == 126 {
            guard bytes.count >= 4 else { return nil }
            length = Int(bytes[first + 2]) << 8 | Int(bytes[first + 3])
            header = 4
        } else if length == 127 {
            guard bytes.count >= 10 else { return nil }
            length = (2..<10).reduce(0) { $0 << 8 | Int(bytes[first + $1]) }
            header = 10
        }
        guard bytes.count >= header + length else { return nil }
        let payload = Array(bytes[(first + header)..<(first + header + length)])
        return (Frame(opcode: bytes[first] & 0x0F, payload: payload), header + length)
    }
}
