import Foundation
import ReceiptsClient
import Testing

@Suite("ReceiptsClient.events")
struct ClientEventTests {
    @Test("the event sequence gets every event once, in order, across a restart of the service")
    func resumesAcrossRestart() async throws {
        try await ReceiptsService.with { service in
            let configuration = ReceiptsClient.Configuration(
                events: .init(initialReconnectDelay: .milliseconds(50), maximumReconnectDelay: .milliseconds(500)))
            let receipts = try await service.tenantClient(configuration: configuration)
            try await receipts.createChat("c", members: ["a", "b"])
            var events = try await receipts.events().makeAsyncIterator()

            var sent: [String] = []
            for index in 1...3 { sent.append(try await receipts.send("before \(index)", in: "c", from: "a").id) }
            var received: [ReceiptsEvent] = []
            for _ in 1...2 { received.append(try #require(try await events.next())) }

            // The service dies with the third event perhaps still unread; while it is down
            // nothing happens, then more events are committed before the consumer asks.
            try await service.restart()
            for index in 4...6 { sent.append(try await receipts.send("after \(index)", in: "c", from: "a").id) }
            try await receipts.markMessagesAsRead(chatID: "c", messageIDs: Array(sent.suffix(2)), by: "b")

            // Up to the read (b's `unread.changed` may come on either side of it).
            while received.count < 12, received.last?.kind != .receiptRead {
                received.append(try #require(try await events.next()))
            }
            #expect(received.filter { $0.kind == .messageCreated }.flatMap(\.messageIDs) == sent)
            #expect(received.last?.kind == .receiptRead && received.last?.messageIDs == Array(sent.suffix(2)))
            #expect(Set(received.map(\.id)).count == received.count, "an event came twice")
            #expect(events.lastEventID == received.last?.id)
        }
    }

    @Test("a position the service does not know gives resyncRequired, then the stream goes on")
    func unknownPositionAsksToResync() async throws {
        try await ReceiptsService.with { service in
            let receipts = try await service.tenantClient()
            try await receipts.createChat("c", members: ["a", "b"])
            var events = try await receipts.events(resumingAfter: "0-unknown").makeAsyncIterator()
            let first = try #require(try await events.next())
            #expect(first.kind == .resyncRequired)
            let message = try await receipts.send("hi", in: "c", from: "a")
            let next = try #require(try await events.next())
            #expect(next.kind == .messageCreated && next.messageIDs == [message.id])
        }
    }
}
