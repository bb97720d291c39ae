import Foundation
@testable import ReceiptsStore
import Testing

/// The hub's decisions in following the log, on made-up reads and times: when it starts,
/// when it gives up waiting at a missing id, and what a new event history does.
@Suite("Event log follower")
struct EventLogFollowerTests {
    let events = EventLogCursorTests()
    let history = EventHistory(segments: [.init(id: "h1", startedAfter: 0, resumableThrough: 0)])
    let start = ContinuousClock.now

    func follower() -> EventLogFollower {
        var follower = EventLogFollower(abandonGapsAfter: .seconds(5))
        let previous = follower.follow(self.history)
        #expect(previous == nil)
        return follower
    }

    func writers(_ transactions: Set<Int64>, withoutTransaction: Bool = false) -> EventWriters {
        EventWriters(transactions: transactions, pids: [], hasWriterWithoutTransaction: withoutTransaction)
    }

    func page(_ ids: [Int64], running: Set<Int64> = [], next: Int64 = 100, history: String = "h1") -> EventLogPage {
        EventLogPage(history: history, snapshot: self.events.snapshot(running: running, next: next), events: ids.map { self.events.event($0) })
    }

    @Test("it starts after the newest event, and is ready once the writers running then have finished")
    func startsAfterNewest() throws {
        var follower = self.follower()
        #expect(follower.needsStart)
        let started = follower.start(after: 10, in: "h1", writers: self.writers([7]), now: self.start)
        #expect(started && !follower.needsStart)
        #expect(follower.ready == nil)
        let whileRunningRead = follower.accept(self.page([11], running: [7]), readAfter: 10)
        let whileRunning = try #require(whileRunningRead)
        #expect(whileRunning.events.isEmpty)
        let takenRead = follower.accept(self.page([11]), readAfter: 10)
        let taken = try #require(takenRead)
        #expect(taken.events.map(\.id) == [11])
        #expect(follower.ready?.position == 11)
        #expect(follower.ready?.history == self.history)
    }

    @Test("a writer without a transaction id holds the start back until the deadline; then its ids are abandoned at the first wait")
    func writerWithoutTransaction() throws {
        var follower = self.follower()
        let blocked = self.writers([], withoutTransaction: true)
        let atFirst = follower.start(after: 10, in: "h1", writers: blocked, now: self.start)
        let later = follower.start(after: 10, in: "h1", writers: blocked, now: self.start + .seconds(4))
        #expect(!atFirst && !later && follower.needsStart)
        let atDeadline = follower.start(after: 10, in: "h1", writers: blocked, now: self.start + .seconds(5))
        #expect(atDeadline && follower.ready == nil)
        // Waited for since the first answer: overdue at once.
        let dueRead = follower.overdueWait(at: self.start + .seconds(5))
        let due = try #require(dueRead)
        #expect(due.target == 10)
        #expect(due.waited == .seconds(5))
    }

    @Test("a wait at a missing id is abandoned after the deadline, not before, up to the newest id seen")
    func overdueGap() throws {
        var follower = self.follower()
        _ = follower.start(after: 10, in: "h1", writers: self.writers([]), now: self.start)
        let takenRead = follower.accept(self.page([11, 13, 14], running: [40]), readAfter: 10)
        let taken = try #require(takenRead)
        #expect(taken.events.map(\.id) == [11])
        follower.waitForGap(on: [40])
        // The first look starts the clock; the deadline counts from there.
        let first = follower.overdueWait(at: self.start)
        let justBefore = follower.overdueWait(at: self.start + .milliseconds(4_999))
        #expect(first == nil && justBefore == nil)
        let dueRead = follower.overdueWait(at: self.start + .seconds(5))
        let due = try #require(dueRead)
        #expect(due.gap == 12)
        #expect(due.target == 14)
        // A new clock for the next wait.
        let again = follower.overdueWait(at: self.start + .seconds(6))
        #expect(again == nil)
        follower.abandoned(through: 14, transaction: 41)
        let afterRead = follower.accept(self.page([13, 14], running: [40], next: 42), readAfter: 11)
        let after = try #require(afterRead)
        #expect(after.events.map(\.id) == [13, 14])
        #expect(follower.ready?.position == 14)
        let noWait = follower.overdueWait(at: self.start + .seconds(60))
        #expect(noWait == nil)
    }

    @Test("a page read after a position the cursor has left, or in another history, is not taken")
    func stalePages() throws {
        var follower = self.follower()
        _ = follower.start(after: 10, in: "h1", writers: self.writers([]), now: self.start)
        let takenRead = follower.accept(self.page([11, 12]), readAfter: 10)
        let taken = try #require(takenRead)
        #expect(taken.events.count == 2)
        let readBefore = follower.accept(self.page([11, 12]), readAfter: 10)
        let otherHistory = follower.accept(self.page([13], history: "h2"), readAfter: 12)
        #expect(readBefore == nil && otherHistory == nil)
        #expect(follower.ready?.position == 12)
    }

    @Test("another history starts the follower again; the same one changes nothing")
    func newHistory() {
        var follower = self.follower()
        _ = follower.start(after: 10, in: "h1", writers: self.writers([]), now: self.start)
        let same = follower.follow(self.history)
        #expect(same == nil && !follower.needsStart)
        let next = EventHistory(segments: self.history.segments + [.init(id: "h2", startedAfter: 8, resumableThrough: 8)])
        let previous = follower.follow(next)
        #expect(previous == self.history)
        #expect(follower.needsStart)
        #expect(follower.isIn("h2") && !follower.isIn("h1"))
        // A start read in the history before is no start in this one.
        _ = follower.start(after: 10, in: "h1", writers: self.writers([]), now: self.start)
        #expect(follower.needsStart)
    }
}
