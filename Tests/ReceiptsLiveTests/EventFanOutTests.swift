import Foundation
import NIOEmbedded
import ReceiptsCore
@testable import ReceiptsLive
import ReceiptsStore
import Testing

/// The hub's fan-out on made-up events: who is handed what from memory, who reads the log,
/// who is closed, and what a failover and a shutdown do to open streams.
@Suite("Event fan-out")
struct EventFanOutTests {
    let history = EventHistory(segments: [.init(id: "h1", startedAfter: 0, resumableThrough: 0)])

    func fanOut(recentEvents: Int = 100, maximumLag: Int = 50, pageSize: Int = 10) -> EventFanOut {
        EventFanOut(options: EventHub.Options(recentEvents: recentEvents, maximumLag: maximumLag, pageSize: pageSize))
    }

    func event(_ id: Int64, tenant: String = "t", audience: [String] = ["a", "b"]) -> StoredEvent {
        StoredEvent(
            id: id, transactionId: 1, tenantId: tenant, type: "message.created", chatId: "c", userId: "a",
            messageIds: ["m\(id)"], data: "{}", audience: audience, occurredAt: Date())
    }

    /// A subscriber at `position`, with its first wake-ups.
    func subscribe(
        _ fanOut: inout EventFanOut, _ principal: Principal, at position: Int64, tenant: String = "t", cursor: Int64? = nil,
        closesOnHistoryChange: Bool = false
    ) -> (key: EventFanOut.Key, wakes: [EventFanOut.Wake]) {
        let start = EventHub.Start(tenant: tenant, position: position, history: "h1", committedBefore: nil, resync: nil)
        return fanOut.subscribe(
            principal, from: start, closesOnHistoryChange: closesOnHistoryChange, history: self.history, cursor: cursor ?? position)
    }

    /// The ids a pull hands out from memory (nil: it was not a pull from memory).
    func pulledIds(_ fanOut: inout EventFanOut, _ key: EventFanOut.Key) -> [Int64]? {
        guard case .events(let events, _, _) = fanOut.pull(for: key) else { return nil }
        return events.map(\.id)
    }

    @Test("whose unread totals the hub reads: users a token stream of theirs sees, every user while a tenant-key stream is open")
    func streamViewers() {
        var fanOut = self.fanOut()
        #expect(!fanOut.isStreamed("t", user: "b"))
        let phone = self.subscribe(&fanOut, .user(tenant: "t", user: "b"), at: 10)
        let laptop = self.subscribe(&fanOut, .user(tenant: "t", user: "b"), at: 10)
        #expect(fanOut.isStreamed("t", user: "b") && !fanOut.isStreamed("t", user: "a") && !fanOut.isStreamed("u", user: "b"))
        fanOut.unsubscribe(phone.key)
        #expect(fanOut.isStreamed("t", user: "b"))
        let backend = self.subscribe(&fanOut, .tenant("t"), at: 10)
        #expect(fanOut.isStreamed("t", user: "a"))
        fanOut.unsubscribe(laptop.key)
        fanOut.unsubscribe(backend.key)
        #expect(!fanOut.isStreamed("t", user: "a") && !fanOut.isStreamed("t", user: "b"))
    }

    @Test("events are appended once per tenant and each subscriber of that tenant is handed them once, in order")
    func fromMemory() {
        var fanOut = self.fanOut()
        let first = self.subscribe(&fanOut, .tenant("t"), at: 10)
        let second = self.subscribe(&fanOut, .user(tenant: "t", user: "b"), at: 10)
        let stranger = self.subscribe(&fanOut, .tenant("u"), at: 10, tenant: "u")
        var deliveries = LiveDeliveries()
        let wakes = fanOut.append([self.event(11), self.event(12)], encoded: [:], history: self.history, deliveries: &deliveries)
        // The subscribers of the tenant pull; the other tenant's is not woken.
        #expect(Set(wakes) == [.pull(first.key), .pull(second.key)])
        #expect(first.wakes == [.pull(first.key)])
        let firstIds = self.pulledIds(&fanOut, first.key)
        #expect(firstIds == [11, 12])
        let firstAgain = self.pulledIds(&fanOut, first.key)
        #expect(firstAgain == [])
        let secondIds = self.pulledIds(&fanOut, second.key)
        #expect(secondIds == [11, 12])
        let strangerIds = self.pulledIds(&fanOut, stranger.key)
        #expect(strangerIds == [])
        #expect(fanOut.position(of: first.key) == 12)
    }

    @Test("a subscriber further back than memory reaches reads the log up to where memory begins, then goes on from memory")
    func behindMemory() {
        var fanOut = self.fanOut(recentEvents: 3, maximumLag: 100)
        let live = self.subscribe(&fanOut, .tenant("t"), at: 10)
        var deliveries = LiveDeliveries()
        _ = fanOut.append((11...15).map { self.event($0) }, encoded: [:], history: self.history, deliveries: &deliveries)
        // Memory holds 13, 14 and 15: the subscriber at 10 reads 11 and 12 from the log.
        guard case .fromLog(let after, let through, _) = fanOut.pull(for: live.key) else {
            Issue.record("expected a read of the log")
            return
        }
        #expect(after == 10 && through == 12)
        let moved = fanOut.move(live.key, from: 10, to: 12, restarting: false)
        #expect(moved)
        // A second read that began at the old position changes nothing.
        let movedAgain = fanOut.move(live.key, from: 10, to: 12, restarting: false)
        #expect(!movedAgain)
        let liveIds = self.pulledIds(&fanOut, live.key)
        #expect(liveIds == [13, 14, 15])
    }

    @Test("a subscriber more than maximumLag behind what memory holds is closed as too slow; the others are not")
    func tooSlow() {
        var fanOut = self.fanOut(maximumLag: 3)
        let slow = self.subscribe(&fanOut, .tenant("t"), at: 10)
        let fast = self.subscribe(&fanOut, .tenant("t"), at: 10)
        var wakes: [EventFanOut.Wake] = []
        for id in Int64(11)...14 {
            var deliveries = LiveDeliveries()
            wakes += fanOut.append([self.event(id)], encoded: [:], history: self.history, deliveries: &deliveries)
            _ = self.pulledIds(&fanOut, fast.key)
        }
        // Closed once, when it passed the lag; woken to pull (and learn why) with the rest.
        #expect(wakes.filter { $0 == .close(slow.key) }.count == 1)
        #expect(!wakes.contains(.close(fast.key)))
        guard case .closed(.tooSlow) = fanOut.pull(for: slow.key) else {
            Issue.record("expected the slow subscriber closed")
            return
        }
        let fastIds = self.pulledIds(&fanOut, fast.key)
        #expect(fastIds == [])
    }

    @Test("after a failover the feeds serve nothing until resumed; a subscriber past what the new history kept is told resync.required, at the newest position kept")
    func failover() {
        var fanOut = self.fanOut()
        let behind = self.subscribe(&fanOut, .tenant("t"), at: 4)
        let ahead = self.subscribe(&fanOut, .tenant("t"), at: 4)
        let webhook = self.subscribe(&fanOut, .tenant("t"), at: 4, closesOnHistoryChange: true)
        var deliveries = LiveDeliveries()
        _ = fanOut.append((5...8).map { self.event($0) }, encoded: [:], history: self.history, deliveries: &deliveries)
        let aheadIds = self.pulledIds(&fanOut, ahead.key)
        #expect(aheadIds == [5, 6, 7, 8])
        // The new history kept everything up to 6.
        let next = EventHistory(segments: self.history.segments + [.init(id: "h2", startedAfter: 6, resumableThrough: 6)])
        // The webhook's subscription ends on a change of history; the streams go on.
        #expect(fanOut.follow(next, from: "h1") == [.close(webhook.key)])
        guard case .awaitingCursor = fanOut.pull(for: ahead.key), case .closed(.historyChanged) = fanOut.pull(for: webhook.key) else {
            Issue.record("expected the streams to wait, and the webhook's subscription closed")
            return
        }
        let woken = fanOut.resume(from: 6)
        #expect(Set(woken) == [.pull(behind.key), .pull(ahead.key), .pull(webhook.key)])
        guard case .resync(let position) = fanOut.pull(for: ahead.key) else {
            Issue.record("expected resync.required for the subscriber given events that were lost")
            return
        }
        #expect(position == 6)
        // The one that was given nothing past 6 goes on from its position, told nothing.
        guard case .fromLog(let after, _, _) = fanOut.pull(for: behind.key) else {
            Issue.record("expected the subscriber behind to read the log from its position")
            return
        }
        #expect(after == 4)
    }

    @Test("shutdown closes every subscriber, and one that comes after is closed at once")
    func shutdown() {
        var fanOut = self.fanOut()
        let open = self.subscribe(&fanOut, .tenant("t"), at: 1)
        #expect(fanOut.closeAll(.shuttingDown) == [.close(open.key)])
        guard case .closed(.shuttingDown) = fanOut.pull(for: open.key) else {
            Issue.record("expected the open subscriber closed")
            return
        }
        let late = self.subscribe(&fanOut, .tenant("t"), at: 1)
        // Its wake-ups end at once; it pulls, and learns why.
        #expect(late.wakes == [.close(late.key), .pull(late.key)])
        fanOut.unsubscribe(open.key)
        fanOut.unsubscribe(late.key)
        #expect(fanOut.subscriberCount == 0)
        #expect(fanOut.feeds.isEmpty)
    }
}

/// Live delivery: which subscribers the hub writes an event to itself, and when a subscriber
/// goes back to pulling.
@Suite("Live delivery in the fan-out")
struct LiveFanOutTests {
    let tests = EventFanOutTests()
    let channel = EmbeddedChannel()

    func liveIds(_ deliveries: LiveDeliveries, _ key: EventFanOut.Key) -> [Int64] {
        deliveries.writes.filter { $0.subscriber == key }.map(\.eventId)
    }

    @Test("an up-to-date subscriber goes live and is written the events it may see, a user only those naming them; it is woken for none")
    func liveSubscribersAreWritten() {
        var fanOut = self.tests.fanOut()
        let key = self.tests.subscribe(&fanOut, .tenant("t"), at: 10)
        let alice = self.tests.subscribe(&fanOut, .user(tenant: "t", user: "a"), at: 10)
        let carol = self.tests.subscribe(&fanOut, .user(tenant: "t", user: "c"), at: 10)
        for subscriber in [key, alice, carol] {
            let outcome1 = fanOut.goLive(subscriber.key, sink: LiveSink(channel: self.channel, framing: .webSocket, tenant: "t"))
            #expect(outcome1)
        }
        var deliveries = LiveDeliveries()
        let wakes = fanOut.append(
            [self.tests.event(11), self.tests.event(12, audience: ["c"]), self.tests.event(13)], encoded: [:],
            history: self.tests.history, deliveries: &deliveries)
        #expect(wakes.isEmpty)
        #expect(self.liveIds(deliveries, key.key) == [11, 12, 13])
        #expect(self.liveIds(deliveries, alice.key) == [11, 13])
        #expect(self.liveIds(deliveries, carol.key) == [12])
        // Nothing to pull while live: the hub wrote it.
        let outcome2 = self.tests.pulledIds(&fanOut, key.key)
        #expect(outcome2 == [])
    }

    @Test("a subscriber behind the newest event does not go live; it pulls, then goes live")
    func behindDoesNotGoLive() {
        var fanOut = self.tests.fanOut()
        let subscriber = self.tests.subscribe(&fanOut, .tenant("t"), at: 10)
        var deliveries = LiveDeliveries()
        _ = fanOut.append([self.tests.event(11)], encoded: [:], history: self.tests.history, deliveries: &deliveries)
        let sink = LiveSink(channel: self.channel, framing: .webSocket, tenant: "t")
        let outcome3 = fanOut.goLive(subscriber.key, sink: sink)
        #expect(!outcome3)
        let outcome4 = self.tests.pulledIds(&fanOut, subscriber.key)
        #expect(outcome4 == [11])
        let outcome5 = fanOut.goLive(subscriber.key, sink: sink)
        #expect(outcome5)
        let outcome6 = fanOut.goLive(subscriber.key, sink: sink)
        #expect(!outcome6)
    }

    @Test("a live subscriber whose socket could not take an event pulls from the one before it, once; a stale report changes nothing")
    func fellBehind() {
        var fanOut = self.tests.fanOut()
        let subscriber = self.tests.subscribe(&fanOut, .tenant("t"), at: 10)
        let sink = LiveSink(channel: self.channel, framing: .webSocket, tenant: "t")
        let outcome7 = fanOut.goLive(subscriber.key, sink: sink)
        #expect(outcome7)
        var deliveries = LiveDeliveries()
        _ = fanOut.append((11...13).map { self.tests.event($0) }, encoded: [:], history: self.tests.history, deliveries: &deliveries)
        // Written 11; the socket could not take 12 (of the first live period).
        let outcome8 = fanOut.fellBehind(subscriber.key, period: 1, at: 11)
        #expect(outcome8 == .pull(subscriber.key))
        let outcome9 = fanOut.fellBehind(subscriber.key, period: 1, at: 12)
        #expect(outcome9 == nil)
        let outcome10 = self.tests.pulledIds(&fanOut, subscriber.key)
        #expect(outcome10 == [12, 13])
        let outcome11 = fanOut.goLive(subscriber.key, sink: sink)
        #expect(outcome11)
        // A report of the period before, arriving late, does not take it out again.
        let outcome12 = fanOut.fellBehind(subscriber.key, period: 1, at: 11)
        #expect(outcome12 == nil)
        #expect(fanOut.position(of: subscriber.key) == 13)
    }

    @Test("closing, unsubscribing and a failover take subscribers out of live delivery, at the newest event")
    func leavingLive() {
        var fanOut = self.tests.fanOut()
        let closed = self.tests.subscribe(&fanOut, .tenant("t"), at: 10)
        let gone = self.tests.subscribe(&fanOut, .tenant("t"), at: 10)
        let following = self.tests.subscribe(&fanOut, .tenant("t"), at: 10)
        for subscriber in [closed, gone, following] {
            let outcome13 = fanOut.goLive(subscriber.key, sink: LiveSink(channel: self.channel, framing: .webSocket, tenant: "t"))
            #expect(outcome13)
        }
        var deliveries = LiveDeliveries()
        _ = fanOut.append([self.tests.event(11)], encoded: [:], history: self.tests.history, deliveries: &deliveries)
        _ = fanOut.close(closed.key, .tooSlow)
        fanOut.unsubscribe(gone.key)
        #expect(fanOut.position(of: closed.key) == 11)
        deliveries = LiveDeliveries()
        _ = fanOut.append([self.tests.event(12)], encoded: [:], history: self.tests.history, deliveries: &deliveries)
        #expect(deliveries.writes.map(\.subscriber) == [following.key])
        // The database goes on to another history that kept everything through 12.
        let next = EventHistory(segments: [
            .init(id: "h1", startedAfter: 0, resumableThrough: 12), .init(id: "h2", startedAfter: 12, resumableThrough: 12),
        ])
        fanOut.follow(next, from: "h1")
        #expect(fanOut.position(of: following.key) == 12)
        _ = fanOut.resume(from: 12)
        deliveries = LiveDeliveries()
        _ = fanOut.append([self.tests.event(13)], encoded: [:], history: next, deliveries: &deliveries)
        #expect(deliveries.isEmpty)
        let outcome14 = self.tests.pulledIds(&fanOut, following.key)
        #expect(outcome14 == [13])
    }
}

extension LiveFanOutTests {
    @Test("writes that would not fit in one look's bound take the feed's live subscribers out before the event: they pull it, nothing twice")
    func boundedDeliveries() {
        var fanOut = self.tests.fanOut()
        let first = self.tests.subscribe(&fanOut, .tenant("t"), at: 10)
        let second = self.tests.subscribe(&fanOut, .user(tenant: "t", user: "a"), at: 10)
        for subscriber in [first, second] {
            let live = fanOut.goLive(subscriber.key, sink: LiveSink(channel: self.channel, framing: .webSocket, tenant: "t"))
            #expect(live)
        }
        var deliveries = LiveDeliveries(limit: 3)
        let wakes = fanOut.append(
            [self.tests.event(11), self.tests.event(12)], encoded: [:], history: self.tests.history, deliveries: &deliveries)
        #expect(deliveries.writes.map(\.eventId) == [11, 11])
        #expect(wakes.count == 2)
        let firstPulled = self.tests.pulledIds(&fanOut, first.key)
        #expect(firstPulled == [12])
        let secondPulled = self.tests.pulledIds(&fanOut, second.key)
        #expect(secondPulled == [12])
    }
}
