import NIOCore
import Testing

@testable import ReceiptsServer

@Suite("Connection deadlines")
struct ConnectionTimelineTests {
    static let limits = ConnectionTimeline.Limits(headTimeout: .seconds(10), idleTimeout: .seconds(60))
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    static func at(_ seconds: Int64) -> NIODeadline { start + .seconds(seconds) }

    @Test("a new connection has the head timeout for its first request")
    func firstHead() {
        let timeline = ConnectionTimeline(limits: Self.limits, now: Self.start)
        #expect(timeline.deadline == Self.at(10))
        #expect(timeline.timerFired(now: Self.at(9)) == .none)
        #expect(timeline.timerFired(now: Self.at(10)) == .close)
    }

    @Test("between requests the idle timeout runs; the first byte of the next head starts the head timeout")
    func keepAlive() {
        var timeline = ConnectionTimeline(limits: Self.limits, now: Self.start)
        #expect(timeline.received(bytes: 100, now: Self.at(1)) == .none)
        timeline.receivedHead(now: Self.at(1))
        #expect(timeline.receivedEnd(now: Self.at(1)) == .none)
        // Answering: nothing is timed, however long.
        #expect(timeline.deadline == nil)
        #expect(timeline.timerFired(now: Self.at(1000)) == .none)
        let timelineAnnouncesFalse = timeline.sendingResponseHead(announcesClose: false)
        #expect(!timelineAnnouncesFalse)
        #expect(timeline.sentResponseEnd(now: Self.at(1000)) == .none)
        #expect(timeline.deadline == Self.at(1060))
        // A head starts arriving 30 s later; it has 10 s, not the 30 s of idle time left.
        #expect(timeline.received(bytes: 3, now: Self.at(1030)) == .none)
        #expect(timeline.deadline == Self.at(1040))
        // More bytes do not extend it.
        #expect(timeline.received(bytes: 3, now: Self.at(1039)) == .none)
        #expect(timeline.timerFired(now: Self.at(1040)) == .close)
    }

    @Test("a body that stops arriving is given up after the idle timeout")
    func stalledBody() {
        var timeline = ConnectionTimeline(limits: Self.limits, now: Self.start)
        timeline.receivedHead(now: Self.at(0), bodyLength: 1000)
        timeline.receivedBody(bytes: 10, now: Self.at(5))
        #expect(timeline.deadline == Self.at(65))
    }

    @Test("an answer sent before a large or chunked body was read announces close, drains boundedly, then closes")
    func earlyAnswerToLargeBody() {
        for length in [1024 * 1024, nil] {
            var timeline = ConnectionTimeline(limits: Self.limits, now: Self.start)
            timeline.receivedHead(now: Self.at(0), bodyLength: length)
            let announced = timeline.sendingResponseHead(announcesClose: false)
            #expect(announced)
            #expect(timeline.sentResponseEnd(now: Self.at(0)) == .none)
            #expect(timeline.deadline == Self.at(2))
            #expect(timeline.received(bytes: 1024 * 1024, now: Self.at(1)) == .none)
            #expect(timeline.received(bytes: 1024 * 1024 + 1, now: Self.at(1)) == .close)

            var finishing = ConnectionTimeline(limits: Self.limits, now: Self.start)
            finishing.receivedHead(now: Self.at(0), bodyLength: length)
            let finishingAnnounced = finishing.sendingResponseHead(announcesClose: false)
            #expect(finishingAnnounced)
            #expect(finishing.sentResponseEnd(now: Self.at(0)) == .none)
            #expect(finishing.receivedEnd(now: Self.at(1)) == .close)
        }
    }

    @Test("an answer sent before a small body was read keeps the connection once the body is in")
    func earlyAnswerToSmallBody() {
        var timeline = ConnectionTimeline(limits: Self.limits, now: Self.start)
        timeline.receivedHead(now: Self.at(0), bodyLength: 300 * 1024)
        timeline.receivedBody(bytes: 100 * 1024, now: Self.at(0))
        let announced = timeline.sendingResponseHead(announcesClose: false)
        #expect(!announced)
        #expect(timeline.sentResponseEnd(now: Self.at(0)) == .none)
        #expect(timeline.deadline == Self.at(2))
        #expect(timeline.receivedEnd(now: Self.at(1)) == .none)
        #expect(timeline.deadline == Self.at(61))
        // A client that never sends the rest is closed after the drain time.
        var stalled = ConnectionTimeline(limits: Self.limits, now: Self.start)
        stalled.receivedHead(now: Self.at(0), bodyLength: 1000)
        let stalledAnnounced = stalled.sendingResponseHead(announcesClose: false)
        #expect(!stalledAnnounced)
        #expect(stalled.sentResponseEnd(now: Self.at(0)) == .none)
        #expect(stalled.timerFired(now: Self.at(2)) == .close)
    }

    @Test("a response that asks to close closes after its end")
    func responseAsksClose() {
        var timeline = ConnectionTimeline(limits: Self.limits, now: Self.start)
        timeline.receivedHead(now: Self.at(0))
        #expect(timeline.receivedEnd(now: Self.at(0)) == .none)
        let timelineAnnouncesTrue = timeline.sendingResponseHead(announcesClose: true)
        #expect(timelineAnnouncesTrue)
        #expect(timeline.sentResponseEnd(now: Self.at(0)) == .close)
    }

    @Test("a request that asks to close gets an answer announcing it, then the close")
    func requestAsksClose() {
        var timeline = ConnectionTimeline(limits: Self.limits, now: Self.start)
        timeline.receivedHead(now: Self.at(0), keepsAlive: false)
        #expect(timeline.receivedEnd(now: Self.at(0)) == .none)
        let announced = timeline.sendingResponseHead(announcesClose: false)
        #expect(announced)
        #expect(timeline.sentResponseEnd(now: Self.at(0)) == .close)
    }

    @Test("shutdown closes idle and half-sent connections at once, busy ones after their answer")
    func quiesce() {
        var idle = ConnectionTimeline(limits: Self.limits, now: Self.start)
        #expect(idle.received(bytes: 10, now: Self.at(0)) == .none)
        #expect(idle.quiesce() == .close)

        var busy = ConnectionTimeline(limits: Self.limits, now: Self.start)
        busy.receivedHead(now: Self.at(0))
        #expect(busy.receivedEnd(now: Self.at(0)) == .none)
        #expect(busy.quiesce() == .none)
        let busyAnnouncesFalse = busy.sendingResponseHead(announcesClose: false)
        #expect(busyAnnouncesFalse)
        #expect(busy.sentResponseEnd(now: Self.at(1)) == .close)
    }
}
