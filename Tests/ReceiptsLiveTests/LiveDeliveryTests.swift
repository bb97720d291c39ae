import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Postgres
import ReceiptsCore
@testable import ReceiptsLive
import ReceiptsStore
import TestSupport
import Testing

/// The hub writing an up-to-date stream's events to its socket itself (`LiveSink`), on a
/// testing channel whose writability the test turns off and on, with a real hub and database.
@Suite("Live delivery")
struct LiveDeliveryTests {
    @Test("a socket that stops taking events misses none: the stream pulls them in order, once, and the hub writes again when it caught up")
    func socketThatStopsTakingEvents() async throws {
        let bed = try await EventHubTests.Bed()
        let (pool, store, tenant, hub) = (bed.pool, bed.store, bed.tenant, bed.hub)
        func catchUp() async { await bed.catchUp() }
        await catchUp()

        let channel = NIOAsyncTestingChannel()
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).get()
        let sink = LiveSink(channel: channel, framing: .webSocket, tenant: "t")
        try await channel.eventLoop.submit { try sink.install() }.get()
        let (subscription, wakeups) = hub.subscribe(.tenant(tenant), from: try await hub.start(tenant: tenant, after: nil))
        let pulled = NIOLockedValueBox<[String]>([])
        let relay = Task { try await subscription.relay(wakeups, to: sink) { id, _ in pulled.withLockedValue { $0.append(id) } } }

        var sent = 0
        /// Sends `count` messages to the group; returns their ids.
        func send(_ count: Int) async throws -> [String] {
            var messages: [String] = []
            for _ in 0..<count {
                sent += 1
                messages.append("m\(sent)")
                _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m\(sent)", sender: "b", text: "x")
            }
            await catchUp()
            return messages
        }
        func waitUntil(_ condition: () async throws -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while try await !condition() {
                guard ContinuousClock.now < deadline else { throw CancellationError() }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        var written: [String] = []
        /// The message ids of the frames written to the socket so far.
        func readWritten() async throws -> [String] {
            while var frame = try await channel.readOutbound(as: ByteBuffer.self) {
                #expect(frame.readInteger(as: UInt8.self) == 0x81)  // a final text frame
                let length = Int(frame.readInteger(as: UInt8.self) ?? 0)
                if length == 126 { _ = frame.readInteger(as: UInt16.self) }
                let event = try JSONDecoder().decode(Event.self, from: Data(frame.readableBytesView))
                written += event.messageIds
            }
            return written
        }
        func pulledMessages() async throws -> [String] {
            let ids = pulled.withLockedValue { $0 }
            let events = try await store.events(tenant: tenant, after: 0, through: .max, limit: 100)
            return ids.compactMap { id in events.first { String($0.id) == id }?.messageIds.first }
        }

        try await waitUntil { hub.isLive(subscription) }
        let first = try await send(3)
        try await waitUntil { try await readWritten() == first }
        #expect(pulled.withLockedValue { $0 }.isEmpty)

        channel.isWritable = false
        let second = try await send(3)
        try await waitUntil { try await pulledMessages() == second }
        #expect(try await readWritten() == first)

        channel.isWritable = true
        try await waitUntil { hub.isLive(subscription) }
        let third = try await send(2)
        try await waitUntil { try await readWritten() == first + third }
        #expect(try await pulledMessages() == second)

        hub.close(subscription, .shuttingDown)
        #expect(try await relay.value == .shuttingDown)
        await sink.closeFromTask()
        _ = try await send(1)
        #expect(try await readWritten() == first + third)
        subscription.cancel()
        try await pool.close()
    }

    @Test("a Server-Sent Events sink writes a heartbeat comment every interval from the event loop, and none once closed")
    func heartbeats() async throws {
        let loop = NIOAsyncTestingEventLoop()
        let channel = NIOAsyncTestingChannel(loop: loop)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).get()
        let sink = LiveSink(channel: channel, framing: .serverSentEvents, tenant: "t")
        sink.startHeartbeats(every: .seconds(15))
        func written() async throws -> [String] {
            var comments: [String] = []
            while let part = try await channel.readOutbound(as: HTTPResponsePart.self) {
                guard case .body(let body) = part else { continue }
                comments.append(String(buffer: body))
            }
            return comments
        }
        await loop.advanceTime(by: .seconds(14))
        #expect(try await written() == [])
        await loop.advanceTime(by: .seconds(1))
        #expect(try await written() == [": heartbeat\n\n"])
        await loop.advanceTime(by: .seconds(15))
        #expect(try await written() == [": heartbeat\n\n"])
        await sink.closeFromTask()
        await loop.advanceTime(by: .seconds(60))
        #expect(try await written() == [])
    }

    @Test("a sink of a chunked SSE response writes each heartbeat as an HTTP/1.1 chunk next to the socket")
    func heartbeatChunks() async throws {
        let loop = NIOAsyncTestingEventLoop()
        let channel = NIOAsyncTestingChannel(loop: loop)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).get()
        let sink = LiveSink(channel: channel, framing: .serverSentEventChunks, tenant: "t")
        try await loop.submit { try sink.install() }.get()
        sink.startHeartbeats(every: .seconds(15))
        await loop.advanceTime(by: .seconds(15))
        let written = try await channel.readOutbound(as: ByteBuffer.self)
        #expect(written.map { String(buffer: $0) } == "d\r\n: heartbeat\n\n\r\n")
        await sink.closeFromTask()
        await loop.advanceTime(by: .seconds(60))
        #expect(try await channel.readOutbound(as: ByteBuffer.self) == nil)
    }

    private struct Event: Decodable {
        let messageIds: [String]
    }
}
