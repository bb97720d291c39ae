import NIOCore
import NIOEmbedded
import NIOWebSocket
@testable import ReceiptsLive
import Testing

/// The event streams' WebSocket pings, on a channel whose clock the test moves.
@Suite("WebSocket keep-alive")
struct WebSocketKeepAliveTests {
    func makeChannel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(WebSocketKeepAlive(interval: .seconds(30)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        return channel
    }

    func pong() -> WebSocketFrame { WebSocketFrame(fin: true, opcode: .pong, data: ByteBuffer()) }

    @Test("a quiet socket is pinged every interval; its pongs stop at the keep-alive, other frames pass on")
    func pingsAndPongs() throws {
        let channel = try self.makeChannel()
        channel.embeddedEventLoop.advanceTime(by: .seconds(29))
        #expect(try channel.readOutbound(as: WebSocketFrame.self) == nil)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(try channel.readOutbound(as: WebSocketFrame.self)?.opcode == .ping)
        try channel.writeInbound(self.pong())
        #expect(try channel.readInbound(as: WebSocketFrame.self) == nil)
        let text = WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "{}"))
        try channel.writeInbound(text)
        #expect(try channel.readInbound(as: WebSocketFrame.self)?.opcode == .text)
        channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        #expect(try channel.readOutbound(as: WebSocketFrame.self)?.opcode == .ping)
        #expect(channel.isActive)
        _ = try channel.finish()
    }

    @Test("a socket that answers a ping with nothing for a whole interval is closed with 1001 'ping timeout'")
    func silentClientIsClosed() throws {
        let channel = try self.makeChannel()
        channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        #expect(try channel.readOutbound(as: WebSocketFrame.self)?.opcode == .ping)
        channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        var close = try #require(try channel.readOutbound(as: WebSocketFrame.self))
        #expect(close.opcode == .connectionClose)
        #expect(close.data.readWebSocketErrorCode() == .goingAway)
        #expect(close.data.readString(length: close.data.readableBytes) == "ping timeout")
        #expect(!channel.isActive)
    }
}
