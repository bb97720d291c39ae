import Postgres
import TestSupport
import Testing

@testable import ReceiptsStore

/// A write request's token is a position read after every statement it ran
/// (`CommitPositionSlot`): a statement that recorded none after the last position leaves the
/// slot without one, so that the request asks the primary after all.
struct CommitPositionSlotTests {
    @Test("the newest position recorded is the request's")
    func newest() {
        let slot = CommitPositionSlot()
        #expect(slot.position == nil)
        slot.record(WALPosition(offset: 20))
        slot.record(WALPosition(offset: 10))
        #expect(slot.position == WALPosition(offset: 20))
    }

    @Test("a statement without a position after the last one recorded leaves none; one recorded after it covers it")
    func unrecordedStatements() {
        let slot = CommitPositionSlot()
        slot.record(WALPosition(offset: 10))
        slot.ranUnrecorded()
        #expect(slot.position == nil)
        slot.record(WALPosition(offset: 30))
        #expect(slot.position == WALPosition(offset: 30))
    }

    @Test("ReceiptsStore.query marks the request's slot: it may have written")
    func queryMarks() async throws {
        let store = ReceiptsStore(pool: TestDatabase.pool, logger: TestDatabase.logger)
        let slot = CommitPositionSlot()
        slot.record(WALPosition(offset: 1))
        try await CommitPositionSlot.$current.withValue(slot) {
            _ = try await store.query("SELECT 1", [])
        }
        #expect(slot.position == nil)
    }
}
