import Foundation
import Postgres
import ReceiptsStore
import TestSupport
import Testing

/// What event ids mean across event histories (`EventHistory`): pure, the lineage in, ids and
/// positions out. The histories here: the first (`first`), then one that began after a
/// failover which kept the events up to 80 of the 100 ids handed out (`second`), then one that
/// kept everything up to 140 of the 150 handed out (`third`).
@Suite("Event histories: ids and positions")
struct EventHistoryTests {
    static let first = EventHistory.Segment(id: "aaaaaaaaaaaa", startedAfter: 0, resumableThrough: 0)
    static let second = EventHistory.Segment(id: "bbbbbbbbbbbb", startedAfter: 100, resumableThrough: 80)
    static let third = EventHistory.Segment(id: "cccccccccccc", startedAfter: 150, resumableThrough: 140)

    @Test("in the first history an id is its number alone, and every number handed out resumes")
    func firstHistory() {
        let history = EventHistory(segments: [Self.first])
        #expect(history.eventId(0) == "0")
        #expect(history.eventId(4711) == "4711")
        #expect(history.position(of: "4711") == .position(4711))
        #expect(history.position(of: "0") == .position(0))
        #expect(history.currentId == Self.first.id)
        #expect(history.idsEnd(of: Self.first.id) == .max)
    }

    @Test("malformed ids and ids of histories the lineage does not have are unknown")
    func malformed() {
        let history = EventHistory(segments: [Self.first, Self.second])
        for id in ["", "x", "-1", "+5", "5.", ".5", "5.BBBBBBBBBBBB", "5.bbbbbbbbbbbb.1", "5 ", "99999999999999999999", "5.zzzz",
                   "120.dddddddddddd", "5.0123456789abcdef0"]
        {
            #expect(history.position(of: id) == .unknown, "\(id)")
        }
    }

    @Test("after a failover, positions the new history kept keep their ids; later ones and its own carry its id")
    func afterFailover() {
        let history = EventHistory(segments: [Self.first, Self.second])
        #expect(history.eventId(80) == "80")
        #expect(history.eventId(81) == "81.bbbbbbbbbbbb")
        #expect(history.eventId(101) == "101.bbbbbbbbbbbb")
        // A client of the first history: up to 80 it saw what this one has; past it, perhaps not.
        #expect(history.position(of: "80") == .position(80))
        #expect(history.position(of: "81") == .lost(keptThrough: 80))
        #expect(history.position(of: "101") == .lost(keptThrough: 80))
        // This history's own ids resume; a number it names by the first history's form never
        // came in its form.
        #expect(history.position(of: "81.bbbbbbbbbbbb") == .position(81))
        #expect(history.position(of: "101.bbbbbbbbbbbb") == .position(101))
        #expect(history.position(of: "80.bbbbbbbbbbbb") == .unknown)
        #expect(history.idsEnd(of: Self.first.id) == 100)
        #expect(history.idsEnd(of: Self.second.id) == .max)
    }

    @Test("across two failovers a position resumes only while every later history kept it; past that, it is lost after the lowest kept")
    func twoFailovers() {
        let history = EventHistory(segments: [Self.first, Self.second, Self.third])
        #expect(history.position(of: "70") == .position(70))
        #expect(history.position(of: "85") == .lost(keptThrough: 80))
        #expect(history.position(of: "120.bbbbbbbbbbbb") == .position(120))
        #expect(history.position(of: "145.bbbbbbbbbbbb") == .lost(keptThrough: 140))
        #expect(history.position(of: "145.cccccccccccc") == .position(145))
        #expect(history.position(of: "145") == .lost(keptThrough: 80))
        #expect(history.eventId(70) == "70")
        #expect(history.eventId(120) == "120.bbbbbbbbbbbb")
        #expect(history.eventId(145) == "145.cccccccccccc")
    }

    @Test("every id the current history hands out resumes to its own position, and names nothing else")
    func roundTrip() {
        let history = EventHistory(segments: [Self.first, Self.second, Self.third])
        var seen = Set<String>()
        for position in Int64(0)...300 {
            let id = history.eventId(position)
            #expect(history.position(of: id) == .position(position), "\(id)")
            #expect(seen.insert(id).inserted)
            #expect(id.utf8.count <= 64)
        }
    }

    @Test("a position written while an earlier history was current (a webhook's, a stream's in the hub) means the same only if kept")
    func positionsOfEarlierHistories() {
        let history = EventHistory(segments: [Self.first, Self.second, Self.third])
        #expect(history.position(70, currentIn: Self.first.id) == .position(70))
        #expect(history.position(90, currentIn: Self.first.id) == .lost(keptThrough: 80))
        #expect(history.position(120, currentIn: Self.second.id) == .position(120))
        // 70 while the second history was current is named by the first: kept by both.
        #expect(history.position(70, currentIn: Self.second.id) == .position(70))
        #expect(history.position(145, currentIn: Self.second.id) == .lost(keptThrough: 140))
        #expect(history.position(145, currentIn: Self.third.id) == .position(145))
        #expect(history.position(5, currentIn: "dddddddddddd") == .unknown)
        // The names they had then.
        #expect(history.eventId(90, currentIn: Self.first.id) == "90")
        #expect(history.eventId(90, currentIn: Self.second.id) == "90.bbbbbbbbbbbb")
        #expect(history.eventId(5, currentIn: "dddddddddddd") == "5.dddddddddddd")
    }
}

/// Event histories in PostgreSQL (sql/functions/histories.sql), on a database of its own (a
/// new history changes every event id that follows). A failover that loses an asynchronous
/// tail is played in place: the lost events deleted, the sequence set back, and a new history
/// begun by hand (`receipts.begin_event_history`, as an operator does after a restore that
/// keeps the cluster and timeline; a promotion begins one by itself: the Patroni tests).
@Suite("Event histories in the database")
struct EventHistoryDatabaseTests {
    /// Runs `body` with two superuser connections to a fresh, migrated database.
    static func withDatabase(_ body: (PostgresConnection, PostgresConnection) async throws -> Void) async throws {
        try await TestDatabase.withFreshDatabase { url in
            let configuration = PostgresConfiguration(connectionString: url)
            try await MigrationRunner(directory: TestDatabase.packageRoot.appendingPathComponent("sql/migrations"), logger: TestDatabase.logger)
                .applyPending(to: configuration)
            let first = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            let second = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            do {
                try await body(first, second)
            } catch {
                await first.close()
                await second.close()
                throw error
            }
            await first.close()
            await second.close()
        }
    }

    /// Writes `count` events in one transaction, as the triggers do; their ids.
    @discardableResult
    static func writeEvents(_ count: Int, on connection: PostgresConnection) async throws -> [Int64] {
        try await connection.query(
            """
            INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, audience)
            SELECT 't', nextval('receipts.event_ids'), pg_current_xact_id(), 'message.created', 'c', 'u', '{}'
            FROM generate_series(1, $1)
            RETURNING event_id
            """, [Int32(count)]
        ).map { try $0.decode(Int64.self, column: 0) }
    }

    static func lineage(on connection: PostgresConnection) async throws -> [(id: String, startedAfter: Int64, resumableThrough: Int64)] {
        try await connection.query("SELECT history_id, started_after, resumable_through FROM receipts.event_history_lineage()")
            .map { (try $0.decode(String.self, column: 0), try $0.decode(Int64.self, column: 1), try $0.decode(Int64.self, column: 2)) }
    }

    @Test("a history begun after a lost tail keeps the positions before the first missing id, and hands out ids above every old one")
    func lostTail() async throws {
        try await Self.withDatabase { connection, _ in
            #expect(try await Self.writeEvents(10, on: connection) == Array(1...10))
            let first = try await Self.lineage(on: connection)
            #expect(first.count == 1 && first[0].startedAfter == 0)

            // The standby had 1...9 but for 7 (committed late on the old primary, after 8 and 9).
            _ = try await connection.executeScript(
                """
                DELETE FROM receipts.events WHERE event_id IN (7, 10);
                SELECT setval('receipts.event_ids', 9);
                """)
            let begun = try await connection.query("SELECT receipts.begin_event_history('test: lost tail')").scalar(String.self)
            let lineage = try await Self.lineage(on: connection)
            #expect(lineage.count == 2)
            #expect(lineage[1].id == begun)
            #expect(lineage[1].startedAfter == 9)
            #expect(lineage[1].resumableThrough == 6)
            // New events get ids after every id handed out before.
            #expect(try await Self.writeEvents(2, on: connection) == [10, 11])
        }
    }

    @Test("the hub's settled position is where the next history starts counting, and only the current history takes one")
    func settledPosition() async throws {
        try await Self.withDatabase { connection, _ in
            try await Self.writeEvents(5, on: connection)
            let history = try await connection.query("SELECT receipts.current_event_history()").scalar(String.self)
            // Id 2 was rolled back long ago; the hub has settled past it.
            _ = try await connection.executeScript("DELETE FROM receipts.events WHERE event_id = 2")
            #expect(try await connection.query("SELECT receipts.settle_event_history($1, 4)", [history]).scalar(Bool.self))
            #expect(try await connection.query("SELECT receipts.settle_event_history('000000000000', 5)").scalar(Bool.self) == false)
            _ = try await connection.query("SELECT receipts.begin_event_history()")
            #expect(try await Self.lineage(on: connection)[1].resumableThrough == 5)
            #expect(try await connection.query("SELECT receipts.settle_event_history($1, 5)", [history]).scalar(Bool.self) == false)
        }
    }

    @Test("an event id taken before a history began and committed after it moves above where the history began")
    func takenBeforeCommittedAfter() async throws {
        try await Self.withDatabase { writer, other in
            try await Self.writeEvents(3, on: writer)
            _ = try await writer.executeScript("BEGIN")
            let taken = try await Self.writeEvents(1, on: writer)
            #expect(taken == [4])
            let begun = try await other.query("SELECT receipts.begin_event_history()").scalar(String.self)
            _ = try await writer.executeScript("COMMIT")
            let lineage = try await Self.lineage(on: other)
            #expect(lineage.last?.id == begun && lineage.last?.startedAfter == 4)
            let ids = try await other.query("SELECT event_id FROM receipts.events ORDER BY event_id").map { try $0.decode(Int64.self, column: 0) }
            #expect(ids == [1, 2, 3, 5])
        }
    }
}
