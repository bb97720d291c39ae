import Foundation
import Postgres
@testable import ReceiptsStore
import Testing

/// The cursor's rule for gaps, on made-up snapshots: ids that may still commit hold the
/// cursor back; ids that can no longer appear do not.
@Suite("Event log cursor")
struct EventLogCursorTests {
    func event(_ id: Int64, transaction: Int64 = 1) -> StoredEvent {
        StoredEvent(
            id: id, transactionId: transaction, tenantId: "t", type: "message.created", chatId: "c", userId: "u",
            messageIds: [], data: "{}", audience: [], occurredAt: Date())
    }

    func snapshot(running: Set<Int64>, next: Int64 = 100) -> TransactionSnapshot {
        TransactionSnapshot(lowestRunning: running.min() ?? next, firstUnassigned: next, running: running)
    }

    @Test("events in order are taken at once")
    func inOrder() {
        var cursor = EventLogCursor(after: 10, running: [])
        #expect(cursor.isReady)
        let taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [50]), events: [self.event(11), self.event(12)]))
        #expect(taken.map(\.id) == [11, 12])
        #expect(cursor.position == 12)
        #expect(!cursor.isWaiting)
    }

    @Test("a missing id whose writer is still running holds back the later ones, which follow it in order")
    func gapThatFills() {
        var cursor = EventLogCursor(after: 10, running: [])
        var taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [40]), events: [self.event(11), self.event(13)]))
        #expect(taken.map(\.id) == [11])
        #expect(cursor.isWaiting)
        #expect(cursor.needsRunningTransactions)
        cursor.waitForGap(on: [40, 41])
        // Still running: still held.
        taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [40, 41]), events: [self.event(13)]))
        #expect(taken.isEmpty)
        // Committed: 12 is visible now and comes first.
        taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [41]), events: [self.event(12, transaction: 40), self.event(13)]))
        #expect(taken.map(\.id) == [12, 13])
        #expect(!cursor.isWaiting)
    }

    @Test("a missing id is passed once everything running after the read has finished (its writer rolled back)")
    func gapThatWasRolledBack() {
        var cursor = EventLogCursor(after: 10, running: [])
        var taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [], next: 41), events: [self.event(12)]))
        // Nothing below the snapshot's xmax runs, but 41 (at or above it) may hold 11.
        #expect(taken.isEmpty)
        // Until the running transactions are known, even a snapshot with nothing running does not pass it.
        taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [], next: 50), events: [self.event(12)]))
        #expect(taken.isEmpty)
        cursor.waitForGap(on: [41, 42])
        taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [42, 45], next: 46), events: [self.event(12)]))
        #expect(taken.isEmpty)
        taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [45], next: 46), events: [self.event(12), self.event(14)]))
        // 12 is taken; 13 is a new gap, which waits again.
        #expect(taken.map(\.id) == [12])
        #expect(cursor.needsRunningTransactions)
        cursor.waitForGap(on: [])
        taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [45], next: 46), events: [self.event(14)]))
        #expect(taken.map(\.id) == [14])
        #expect(!cursor.isWaiting)
    }

    @Test("at start, the cursor is not ready until what was running then has finished")
    func start() {
        var cursor = EventLogCursor(after: 10, running: [7, 60])
        #expect(!cursor.isReady)
        #expect(cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [7]), events: [self.event(11)])).isEmpty)
        #expect(cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [], next: 60), events: [self.event(11)])).isEmpty)
        #expect(!cursor.isReady)
        let taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.snapshot(running: [], next: 61), events: [self.event(11)]))
        #expect(cursor.isReady)
        #expect(taken.map(\.id) == [11])
    }

    @Test("snapshots parse from PostgreSQL's text form")
    func parsing() {
        let snapshot = TransactionSnapshot("748:752:748,750")
        #expect(snapshot == TransactionSnapshot(lowestRunning: 748, firstUnassigned: 752, running: [748, 750]))
        #expect(snapshot?.hasFinished(749) == true)
        #expect(snapshot?.hasFinished(750) == false)
        #expect(snapshot?.hasFinished(752) == false)
        #expect(TransactionSnapshot("5:5:") == TransactionSnapshot(lowestRunning: 5, firstUnassigned: 5, running: []))
        #expect(TransactionSnapshot("nonsense") == nil)
    }
}

/// Abandoned ids (sql/functions/events.sql): stepped over only in reads made after
/// the abandoning call, and only up to its horizon.
@Suite("Event log cursor: abandoned ids")
struct EventLogCursorAbandonmentTests {
    let base = EventLogCursorTests()

    @Test("a missing id is stepped over once a read shows the abandoning call finished, and only up to its horizon")
    func abandonedGap() {
        var cursor = EventLogCursor(after: 10, running: [])
        var taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.base.snapshot(running: [40]), events: [self.base.event(12), self.base.event(13)]))
        #expect(taken.isEmpty)
        cursor.waitForGap(on: [40])
        #expect(cursor.waitingAt == 11)
        #expect(cursor.abandonmentTarget == 13)
        cursor.abandon(through: 13, transaction: 60)
        // A read whose snapshot does not show the call finished: still held.
        taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.base.snapshot(running: [40, 60], next: 61), events: [self.base.event(12), self.base.event(13)]))
        #expect(taken.isEmpty)
        // After the call: 11 is gone; 12 and 13 come; 15 waits at 14, which is above the horizon.
        taken = cursor.advance(
            with: EventLogPage(history: "h", snapshot: self.base.snapshot(running: [40], next: 61), events: [self.base.event(12), self.base.event(13), self.base.event(15)]))
        #expect(taken.map(\.id) == [12, 13])
        #expect(cursor.waitingAt == 14)
        // The late writer's events, moved above the horizon as it committed, come in order.
        cursor.waitForGap(on: [40, 62])
        taken = cursor.advance(
            with: EventLogPage(history: "h", snapshot: self.base.snapshot(running: [], next: 70), events: [self.base.event(14, transaction: 62), self.base.event(15), self.base.event(16, transaction: 40)]))
        #expect(taken.map(\.id) == [14, 15, 16])
        #expect(!cursor.isWaiting)
    }

    @Test("a start that waits for running transactions is ready once its position is abandoned")
    func abandonedStart() {
        var cursor = EventLogCursor(after: 10, running: [40])
        #expect(!cursor.isReady)
        #expect(cursor.waitingAt == 10)
        cursor.abandon(through: 10, transaction: 60)
        let taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.base.snapshot(running: [40], next: 61), events: [self.base.event(11)]))
        #expect(cursor.isReady)
        #expect(taken.map(\.id) == [11])
    }
}

extension EventLogCursorAbandonmentTests {
    @Test("a later gap that waits for a transaction given up on before says so, until that transaction finishes")
    func laterGapBehindAnAbandonedWriter() {
        var cursor = EventLogCursor(after: 10, running: [])
        _ = cursor.advance(with: EventLogPage(history: "h", snapshot: self.base.snapshot(running: [40]), events: [self.base.event(12)]))
        cursor.waitForGap(on: [40])
        cursor.abandon(through: 12, transaction: 60)
        var taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.base.snapshot(running: [40], next: 61), events: [self.base.event(12)]))
        #expect(taken.map(\.id) == [12])
        #expect(!cursor.waitsForAbandonedWriter)
        // A new gap (14 rolled back, say) while 40 is still open.
        taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.base.snapshot(running: [40], next: 62), events: [self.base.event(13), self.base.event(15)]))
        #expect(taken.map(\.id) == [13])
        cursor.waitForGap(on: [40, 61])
        taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.base.snapshot(running: [40, 61], next: 62), events: [self.base.event(15)]))
        #expect(taken.isEmpty)
        #expect(cursor.waitsForAbandonedWriter)
        // 40 finished: an ordinary wait again.
        taken = cursor.advance(with: EventLogPage(history: "h", snapshot: self.base.snapshot(running: [61], next: 62), events: [self.base.event(15)]))
        #expect(!cursor.waitsForAbandonedWriter)
    }
}
