import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
@testable import ReceiptsLive
import ReceiptsStore
import Testing

/// The writes the hub hands an event loop for live streams, on embedded channels that share
/// one loop: taken tenant by tenant, and all written before a stream's own.
@Suite("Live write queue")
struct LiveWriteQueueTests {
    let loop = EmbeddedEventLoop()
    let history = EventHistory(segments: [.init(id: "h1", startedAfter: 0, resumableThrough: 0)])

    /// A live Server-Sent Events sink of `tenant` on `loop`, on an active channel.
    func sink(of tenant: String) throws -> (LiveSink, EmbeddedChannel) {
        let channel = EmbeddedChannel(loop: self.loop)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        return (LiveSink(channel: channel, framing: .serverSentEvents, tenant: tenant), channel)
    }

    func event(_ id: Int64, tenant: String) -> LiveEvent {
        LiveEvent(
            StoredEvent(
                id: id, transactionId: 1, tenantId: tenant, type: "message.created", chatId: "c", userId: "a",
                messageIds: ["m\(id)"], data: "{}", audience: [], occurredAt: Date()),
            history: self.history, totals: nil)
    }

    /// The event ids written to `channel` so far, and the other body parts as text.
    func written(_ channel: EmbeddedChannel) throws -> [String] {
        var parts: [String] = []
        while let part = try channel.readOutbound(as: HTTPResponsePart.self) {
            guard case .body(let body) = part else { continue }
            let text = String(buffer: body)
            parts.append(text.hasPrefix("id: ") ? String(text.dropFirst(4).prefix { $0 != "\n" }) : text)
        }
        return parts
    }

    @Test("one tenant's crowd of live streams does not hold another tenant's event back: it is written in the loop's first go")
    func crowdDoesNotHoldOthersBack() throws {
        let crowd = try (0..<1000).map { _ in try self.sink(of: "crowd") }
        let (quietSink, quietChannel) = try self.sink(of: "quiet")
        var deliveries = LiveDeliveries()
        // The crowd's event first: the worst case for the quiet tenant.
        let crowdEvent = self.event(1, tenant: "crowd")
        deliveries.add(crowdEvent, after: 0, to: crowd.enumerated().map { (key: $0.offset, value: LiveRoute(sink: $0.element.0, period: 1, committedBefore: nil)) }, tenant: "crowd")
        deliveries.add(self.event(2, tenant: "quiet"), after: 0, to: [(key: 0, value: LiveRoute(sink: quietSink, period: 1, committedBefore: nil))], tenant: "quiet")
        let fellBehind = NIOLockedValueBox(0)
        deliveries.send { _, _, _ in fellBehind.withLockedValue { $0 += 1 } }
        #expect(quietSink.hasWaitingWrites)

        // Runs after the loop's first go (the hand-over is first in the loop's queue).
        let afterFirstGo = NIOLockedValueBox<(quietWaits: Bool, crowdWaiting: Int)?>(nil)
        let sinks = crowd.map(\.0)
        self.loop.execute {
            afterFirstGo.withLockedValue { $0 = (quietSink.hasWaitingWrites, sinks.count { $0.hasWaitingWrites }) }
        }
        self.loop.run()
        let seen = try #require(afterFirstGo.withLockedValue { $0 })
        #expect(!seen.quietWaits)
        #expect(seen.crowdWaiting >= 1000 - LiveWriteQueue.writesPerGo)
        #expect(try self.written(quietChannel) == ["2"])
        for (sink, channel) in crowd {
            #expect(!sink.hasWaitingWrites)
            #expect(try self.written(channel) == ["1"])
        }
        #expect(fellBehind.withLockedValue { $0 } == 0)
    }

    @Test("a stream that ends while the hub's writes wait on its loop has them written before its end, and none after")
    func waitingWritesGoBeforeTheEnd() throws {
        let crowd = try (0..<600).map { _ in try self.sink(of: "t") }
        let (lastSink, lastChannel) = crowd.last!
        func handOver(_ id: Int64) {
            var deliveries = LiveDeliveries()
            deliveries.add(self.event(id, tenant: "t"), after: id - 1, to: crowd.enumerated().map { (key: $0.offset, value: LiveRoute(sink: $0.element.0, period: 1, committedBefore: nil)) }, tenant: "t")
            deliveries.send { _, _, _ in }
        }
        handOver(1)
        handOver(2)
        // After the first go: the last stream's writes still wait when it ends.
        self.loop.execute {
            #expect(lastSink.hasWaitingWrites)
            lastSink.close()
            lastChannel.writeAndFlush(HTTPResponsePart.body(ByteBuffer(string: "end")), promise: nil)
        }
        handOver(3)
        self.loop.run()
        let lastWritten = try self.written(lastChannel)
        #expect(lastWritten == ["1", "2", "end"])
        #expect(try self.written(crowd.first!.1) == ["1", "2", "3"])
    }

    @Test("while writes wait, the loop pauses between goes for its share; a tenant with nothing waiting is written at once meanwhile")
    func pausesForItsShare() throws {
        let crowd = try (0..<600).map { _ in try self.sink(of: "crowd") }
        let (quietSink, quietChannel) = try self.sink(of: "quiet")
        var deliveries = LiveDeliveries()
        deliveries.add(self.event(1, tenant: "crowd"), after: 0, to: crowd.enumerated().map { (key: $0.offset, value: LiveRoute(sink: $0.element.0, period: 1, committedBefore: nil)) }, tenant: "crowd")
        deliveries.send(loopShare: 50) { _, _, _ in }
        self.loop.run()
        // One go written; the next waits for the pause (the embedded loop's clock stands still).
        #expect(crowd.count { $0.0.hasWaitingWrites } == 600 - LiveWriteQueue.writesPerGo)

        var quiet = LiveDeliveries()
        quiet.add(self.event(2, tenant: "quiet"), after: 0, to: [(key: 0, value: LiveRoute(sink: quietSink, period: 1, committedBefore: nil))], tenant: "quiet")
        quiet.send(loopShare: 50) { _, _, _ in }
        self.loop.run()
        #expect(!quietSink.hasWaitingWrites)
        #expect(try self.written(quietChannel) == ["2"])
        #expect(crowd.count { $0.0.hasWaitingWrites } == 600 - LiveWriteQueue.writesPerGo)

        self.loop.advanceTime(by: .seconds(10))
        #expect(crowd.allSatisfy { !$0.0.hasWaitingWrites })
        for (_, channel) in crowd { #expect(try self.written(channel) == ["1"]) }
    }
}
