import Logging
import Postgres

/// A database recorded a part of the migration chain that `0001_baseline.sql` folded, or a
/// version of it that differs from the one folded: the runner cannot tell what its schema
/// holds.
public struct LegacyChainError: Error, CustomStringConvertible {
    /// The versions the database recorded.
    public let recordedVersions: [Int]

    public var description: String {
        "this database was migrated by an earlier, unreleased layout of sql/migrations (it recorded versions "
            + "\(self.recordedVersions.map(String.init).joined(separator: ", ")), not the complete chain 1-19 as it landed); "
            + "nothing was released with that layout, so recreate the database (DROP SCHEMA receipts CASCADE, or a new "
            + "database) and run receiptsd migrate again"
    }
}

extension MigrationRunner {
    /// The chain of migrations that `0001_baseline.sql` folded, as a database that ran it
    /// recorded it: version, name and the MD5 of the file (Tests/Fixtures/legacy-chain).
    public static let foldedChain: [(version: Int, name: String, checksum: String)] = [
        (1, "initial_schema", "97ffbbe7dcad237e565a9a95fa549b50"),
        (2, "receipt_functions", "bc7e54d08a2d63da2866eb6fb27b3d08"),
        (3, "event_log", "bf6abb9bd2b8cbf00c2992652b63ab3a"),
        (4, "faster_writes", "cbf26626a329942ad99d05ea009890cb"),
        (5, "batched_sends", "b8b1ca120fe2b98a112bcdd5ac82dd57"),
        (6, "unread_shortcuts", "cdcf71cbc8bd244e91c5f7bc67b4186a"),
        (7, "leaner_receipt_trigger", "83cde618fc2f41f123ab169c47a0ff87"),
        (8, "leaner_batched_watermarks", "4f27dbf99d4f09cda03c3a86e4be05ce"),
        (9, "room_for_a_read_all", "30173ecb24f0227ec9b392c947a9c736"),
        (10, "unread_from_the_row_in_hand", "da3f54d53efb3cc75fedf6f7f442e136"),
        (11, "audience_in_the_trigger_statement", "a8178aacec6cdd91362be4ab13b8b8a6"),
        (12, "leaner_single_mark_read", "80b6b3a6075a85b52425ee6a2af3ab7a"),
        (13, "plans_that_fit_every_call", "2be0a9cc2a6c6cf5914a92319e44979d"),
        (14, "unread_counts_written_out", "65e6e581d772478a73ee4892579e1e9c"),
        (15, "identifier_check_without_a_bounded_repeat", "f89acc6a260c10eee001876a4fca5afd"),
        (16, "event_log_readers", "b3a8797bbb8b3fbd8d3082bcb9e2abb2"),
        (17, "forced_row_security", "23de932237e2091b5c07e775654677c0"),
        (18, "receipts_in_member_chunks", "ba2f9511a550dd019301b0ebd56821a4"),
        (19, "bounded_wait_for_event_ids", "cb230d8cb2e1b7924ebb00476d6bc899"),
    ]

    /// When the database recorded the folded chain, replaces its records with the baseline's
    /// (see the type's documentation); returns whether it did. Throws `LegacyChainError` for a
    /// part of that chain or an edited version of it.
    func adoptLegacyChain(on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT version, name, checksum FROM receipts.schema_migrations ORDER BY version")
        let recorded = try rows.map {
            (version: try $0.decode(Int.self, column: 0), name: try $0.decode(String.self, column: 1), checksum: try $0.decode(String.self, column: 2))
        }
        // Only a runner of today's layout takes the chain over (tests still run the chain's own
        // files to build a database as it was).
        guard let baseline = self.migrations.first, baseline.version == 1, baseline.name != Self.foldedChain[0].name else { return false }
        // The old chain's first migration is the only one named initial_schema.
        guard recorded.contains(where: { $0.version == 1 && $0.name == Self.foldedChain[0].name }) else { return false }
        let isWholeChain = recorded.count == Self.foldedChain.count
            && zip(recorded, Self.foldedChain).allSatisfy { $0.version == $1.version && $0.name == $1.name && $0.checksum == $1.checksum }
        guard isWholeChain else { throw LegacyChainError(recordedVersions: recorded.map(\.version)) }
        try await connection.withTransaction { connection in
            try await connection.execute("DELETE FROM receipts.schema_migrations WHERE version = ANY ($1)", [Self.foldedChain.map(\.version)])
            try await connection.execute(
                "INSERT INTO receipts.schema_migrations (version, name, checksum) VALUES ($1, $2, md5($3))",
                [baseline.version, baseline.name, baseline.sql]
            )
        }
        self.logger.notice(
            "recorded the baseline in place of the migration chain it folded",
            metadata: ["receipts.migration": "\(baseline.version)_\(baseline.name)"]
        )
        return true
    }
}
