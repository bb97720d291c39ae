import NIOConcurrencyHelpers
import Postgres

/// Where a write request's commit ended, as the store read it on the write's own connection
/// right after the commit: the request's consistency token, for free where the write went
/// through a batch (the position is read in the batch's pipeline) and for one more statement
/// on the same connection where it did not.
///
/// The HTTP edge puts a slot in the request's task (`current`); store calls that write record
/// the newest position they saw into it. A statement that went another way (`ReceiptsStore.query`,
/// which may write) after the last position recorded leaves the slot without one: the
/// request then gets its position from `PositionProbe`, read after all of its statements. (A
/// position recorded after such a statement covers it: the statement's commit had returned,
/// so the log was flushed past it.)
public final class CommitPositionSlot: Sendable {
    /// The slot of the current write request, if any.
    @TaskLocal public static var current: CommitPositionSlot?

    /// The statement that reads the position: where the log is flushed to
    /// (`pg_current_wal_flush_lsn()`), which a commit that has returned ended at or before
    /// when it waited for its flush (`synchronous_commit` on, the default, or stronger), and
    /// which standbys receive without delay; in sessions that commit without waiting
    /// (`synchronous_commit = off`), where anything is inserted (`pg_current_wal_insert_lsn()`),
    /// which standbys reach once the WAL writer has flushed it (within `wal_writer_delay`).
    /// Not the insert position always: other sessions' asynchronous commits (the service's
    /// own NOTIFYs to other instances) would hold every token up until that flush.
    static let positionSQL = """
        SELECT CASE WHEN current_setting('synchronous_commit') = 'off' THEN pg_current_wal_insert_lsn()
                    ELSE pg_current_wal_flush_lsn() END::text
        """

    private struct Recorded {
        var position: WALPosition?
        /// A statement ran after the last position recorded without recording one.
        var isBehind = false
    }

    private let recorded = NIOLockedValueBox(Recorded())

    public init() {}

    /// The newest position recorded, if it covers every statement of the request so far.
    public var position: WALPosition? {
        self.recorded.withLockedValue { $0.isBehind ? nil : $0.position }
    }

    func record(_ position: WALPosition) {
        self.recorded.withLockedValue { recorded in
            recorded.position = max(position, recorded.position ?? position)
            recorded.isBehind = false
        }
    }

    /// Notes a statement that may have written and recorded no position.
    func ranUnrecorded() {
        self.recorded.withLockedValue { $0.isBehind = true }
    }

    /// The position in the rows of `positionSQL`; nil when they hold none.
    static func position(in rows: PostgresRows) -> WALPosition? {
        guard let text = try? rows.first?.decode(String?.self, column: 0) else { return nil }
        return WALPosition(text)
    }

    /// Reads the position on `connection` (after its last commit) into the current slot, if
    /// there is one; a failure leaves the slot as it was.
    static func recordPosition(on connection: PostgresConnection) async {
        guard let slot = Self.current, let rows = try? await connection.query(Self.positionSQL, []) else { return }
        if let position = Self.position(in: rows) { slot.record(position) }
    }
}
