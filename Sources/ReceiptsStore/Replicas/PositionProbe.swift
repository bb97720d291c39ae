import NIOConcurrencyHelpers
import Postgres

/// A log position read from one server *after* the caller asked for it: on the primary,
/// where its log stands once a write has committed (the write's consistency token); on a
/// standby, how far it has replayed.
///
/// Callers at the same time share reads: one caller (the leader) runs the query, and those
/// who asked while it ran share the next one, which the first of them runs (a read that had
/// started before they asked could show a position from before their commit). Under load
/// that is one query per round trip, whatever the number of callers.
public final class PositionProbe: Sendable {
    private let pool: PostgresConnectionPool
    private let sql: String
    private let state = NIOLockedValueBox(State())

    private struct State {
        var running = false
        /// Callers that asked while a query ran: the next query is theirs.
        var waiting: [CheckedContinuation<Turn, Never>] = []
    }

    /// What a waiting caller gets: a position read after it asked, a failure, or the lead of
    /// the next query (for itself and `followers`).
    private enum Turn {
        case read(Result<WALPosition, PostgresError>)
        case lead(followers: [CheckedContinuation<Turn, Never>])
    }

    /// The primary's log position (`CommitPositionSlot.positionSQL`): every transaction of
    /// the service committed before the call ended at or before it.
    public static func commits(on primary: PostgresConnectionPool) -> PositionProbe {
        PositionProbe(pool: primary, sql: Self.commitPosition)
    }

    /// How far a standby has replayed (`pg_last_wal_replay_lsn()`). A server that is not in
    /// recovery (a promoted standby) has no such position: the probe fails there.
    public static func replay(on standby: PostgresConnectionPool) -> PositionProbe {
        PositionProbe(pool: standby, sql: Self.replayPosition)
    }

    private static let commitPosition = CommitPositionSlot.positionSQL
    private static let replayPosition = "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()::text END"

    /// The primary's position now, read once (not shared).
    static func read(on primary: PostgresConnectionPool) async throws(PostgresError) -> WALPosition {
        try await Self.read(Self.commitPosition, on: primary).get()
    }

    /// A standby's replay position now, read once (not shared); fails on a server that is
    /// not in recovery.
    static func readReplay(on standby: PostgresConnectionPool) async throws(PostgresError) -> WALPosition {
        try await Self.read(Self.replayPosition, on: standby).get()
    }

    private init(pool: PostgresConnectionPool, sql: String) {
        self.pool = pool
        self.sql = sql
    }

    /// A position read after this call began. Bounded by the caller's database deadline (or
    /// the pool's lease timeout), as any query; cancellation is not waited on.
    public func positionAfterNow() async throws(PostgresError) -> WALPosition {
        let leads = self.state.withLockedValue { state in
            if state.running { return false }
            state.running = true
            return true
        }
        if leads { return try await self.lead(followers: []).get() }
        let turn = await withCheckedContinuation { continuation in
            let leadsAfterAll = self.state.withLockedValue { state in
                // The query ended between the two locks: lead the next one.
                if !state.running {
                    state.running = true
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if leadsAfterAll { continuation.resume(returning: .lead(followers: [])) }
        }
        switch turn {
        case .read(let result): return try result.get()
        case .lead(let followers): return try await self.lead(followers: followers).get()
        }
    }

    /// Runs one query for the leader and `followers`, answers the followers, and hands the
    /// lead to the first caller that asked meanwhile (or ends the run).
    private func lead(followers: [CheckedContinuation<Turn, Never>]) async -> Result<WALPosition, PostgresError> {
        let result = await Self.read(self.sql, on: self.pool)
        for follower in followers { follower.resume(returning: .read(result)) }
        let next = self.state.withLockedValue { state -> [CheckedContinuation<Turn, Never>] in
            let next = state.waiting
            state.waiting = []
            if next.isEmpty { state.running = false }
            return next
        }
        if let leader = next.first { leader.resume(returning: .lead(followers: Array(next.dropFirst()))) }
        return result
    }

    private static func read(_ sql: String, on pool: PostgresConnectionPool) async -> Result<WALPosition, PostgresError> {
        do {
            let rows = try await pool.query(sql, [])
            guard let text = try rows.first?.decode(String?.self, column: 0), let position = WALPosition(text) else {
                return .failure(PostgresError(code: .invalidValue, message: "the server reported no log position (\(sql))"))
            }
            return .success(position)
        } catch let error as PostgresError {
            return .failure(error)
        } catch {
            return .failure(PostgresError(code: .connectionFailed, message: "\(error)"))
        }
    }
}
