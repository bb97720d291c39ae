import Logging
import NIOCore
import Postgres

/// An import once its body is staged: its lines, those the parser rejected, and how many
/// chats loading goes through (0: it is done already).
public struct StagedImport: Sendable, Equatable {
    public let id: String
    public let lines: Int64
    public let rejected: Int64
    public let units: Int
}

/// An import as `GET /v1/imports/{importId}` shows it.
public struct ImportState: Sendable, Equatable {
    public enum Phase: String, Sendable {
        case running, done, failed
    }

    public let id: String
    public let phase: Phase
    public let lines: Int64
    public let chats: Int64
    public let messages: Int64
    public let receipts: Int64
    public let rejected: Int64
    /// The first 100 errors, by line.
    public let errors: [ImportLineError]
    /// Why it failed (an error of ours, not of a line).
    public let failure: String?
}

/// What one step of loading did (`ReceiptsStore.loadImportGroup`).
public enum ImportGroupOutcome: Sendable, Equatable {
    /// A group of chats loaded; `unitsLoaded` of `units` so far.
    case loaded(unitsLoaded: Int, units: Int)
    /// The last group loaded: the import is done.
    case done(units: Int)
    /// The lease is gone (another instance holds the import, or it ended).
    case notHolder
}

extension ReceiptsStore {
    /// How long the statements of an import may run: staging a body of 1 GiB, or one group.
    static let importStatementTimeout = Duration.seconds(1800)

    /// Stages an import's body (sql/migrations/0028_imports.sql): reads it chunk by chunk,
    /// parses each line and COPYs the rows into `receipts.import_rows` (through a temporary
    /// table: COPY refuses a table with row-level security), all in one
    /// transaction with the import's row, so that once this returns the whole body is in the
    /// database and any instance can load it. Lines the parser rejects are recorded as the
    /// import's errors; the rest wait for loading (`loadImportGroup`).
    ///
    /// On a connection of its own (an upload holds it for as long as the body takes to come),
    /// whose statements may run for `importStatementTimeout`.
    ///
    /// - Parameters:
    ///   - owner: who loads it, holding its lease from the start (`receiptsd import` loads its
    ///     own); nil: any instance's import worker.
    ///   - progress: called with the bytes read so far, after each chunk.
    /// - Throws: `ImportBodyError` when the body is refused as a whole (nothing is staged).
    public func stageImport<Body: AsyncSequence>(
        tenant: String, id: String, body: Body, maximumBytes: Int, owner: (name: String, lease: Duration)? = nil,
        progress: ((Int) -> Void)? = nil
    ) async throws -> StagedImport where Body.Element == ByteBuffer {
        let connection = try await PostgresConnection.connect(to: self.pool.configuration, logger: self.logger)
        do {
            let staged = try await self.stage(
                tenant: tenant, id: id, body: body, maximumBytes: maximumBytes, owner: owner, progress: progress, on: connection)
            await connection.close()
            return staged
        } catch {
            await connection.close()
            throw error
        }
    }

    private func stage<Body: AsyncSequence>(
        tenant: String, id: String, body: Body, maximumBytes: Int, owner: (name: String, lease: Duration)?,
        progress: ((Int) -> Void)?, on connection: PostgresConnection
    ) async throws -> StagedImport where Body.Element == ByteBuffer {
        try await connection.withTransaction { connection in
            let timeout = "\(Self.importStatementTimeout.components.seconds)s"
            try await connection.execute("SELECT set_config('statement_timeout', \(timeout), true), receipts.enter_tenant(\(tenant))")
            try await connection.execute(
                """
                INSERT INTO receipts.imports (tenant_id, import_id, lines, lease_owner, lease_expires_at)
                VALUES (\(tenant), \(id), 0, \(owner?.name), now() + \(owner.map { Self.interval($0.lease) })::interval)
                """)
            try await connection.execute(ImportRows.createUploadTable, [])
            var stager = ImportStager(tenant: tenant, importId: id, maximumBytes: maximumBytes)
            try await connection.copyFrom(ImportRows.copy()) { writer in
                for try await chunk in body {
                    try stager.consume(chunk)
                    if stager.rowBytes >= 256 * 1024 { try await writer.write(stager.takeRows()) }
                    progress?(stager.bytesRead)
                }
                try stager.finish()
                try await writer.write(stager.takeRows())
            }
            try await connection.execute(ImportRows.moveUploadedRows, [])
            try await connection.execute(
                """
                SELECT receipts.record_import_errors(\(tenant), \(id), \(stager.errors.map(\.line)), \(stager.errors.map(\.code)),
                                                     \(stager.errors.map(\.message)), \(stager.rejected))
                """)
            try await connection.execute(
                "UPDATE receipts.imports SET lines = \(stager.lines) WHERE tenant_id = \(tenant) AND import_id = \(id)")
            let units = try await connection.query("SELECT receipts.plan_import(\(tenant), \(id))").scalar(Int.self)
            return StagedImport(id: id, lines: stager.lines, rejected: stager.rejected, units: units)
        }
    }

    /// An import of `tenant` (nil: none of that id, or another tenant's).
    public func importState(tenant: String, id: String) async throws -> ImportState? {
        let rows = try await self.query(
            """
            SELECT state, lines, chats, messages, receipts, rejected, failure, error_lines, error_codes, error_messages
            FROM receipts.import_state(\(tenant), \(id))
            """)
        guard let row = rows.first else { return nil }
        let lines = try row.decode([Int64].self, column: 7)
        let codes = try row.decode([String].self, column: 8)
        let messages = try row.decode([String].self, column: 9)
        return ImportState(
            id: id, phase: ImportState.Phase(rawValue: try row.decode(String.self, column: 0)) ?? .failed,
            lines: try row.decode(Int64.self, column: 1), chats: try row.decode(Int64.self, column: 2),
            messages: try row.decode(Int64.self, column: 3), receipts: try row.decode(Int64.self, column: 4),
            rejected: try row.decode(Int64.self, column: 5),
            errors: zip(lines, zip(codes, messages)).map { ImportLineError(line: $0, code: $1.0, message: $1.1) },
            failure: try row.decode(String?.self, column: 6))
    }

    /// Renews the lease of the import this instance (`owner`) loads, or takes the oldest
    /// running one whose lease is free or expired; nil when there is none.
    /// With `only`, that import alone (`receiptsd import` loads its own).
    public func claimImport(owner: String, lease: Duration, only: (tenant: String, id: String)? = nil) async throws -> (tenant: String, id: String)? {
        let rows = try await self.query(
            "SELECT tenant_id, import_id FROM receipts.claim_import(\(owner), \(Self.interval(lease)), \(only?.tenant), \(only?.id))")
        guard let row = rows.first else { return nil }
        return (try row.decode(String.self, column: 0), try row.decode(String.self, column: 1))
    }

    /// Loads the next group of an import's chats, up to `maximumRows` staged rows, for the
    /// holder of its lease (`receipts.import_group`), on a connection of its own whose
    /// statements may run for `importStatementTimeout`. The group's `chat.imported` events
    /// are signalled to the event hub.
    public func loadImportGroup(tenant: String, id: String, owner: String, lease: Duration, maximumRows: Int) async throws -> ImportGroupOutcome {
        defer { self.committedWrites.signal() }
        let rows = try await self.maintenanceQuery(
            """
            SELECT outcome, next_unit, units
            FROM receipts.import_group(\(tenant), \(id), \(owner), \(Self.interval(lease)), \(Int64(maximumRows)))
            """,
            timeout: Self.importStatementTimeout)
        guard let row = rows.first else { return .notHolder }
        switch try row.decode(String.self, column: 0) {
        case "loaded": return .loaded(unitsLoaded: try row.decode(Int.self, column: 1) - 1, units: try row.decode(Int.self, column: 2))
        case "done": return .done(units: try row.decode(Int.self, column: 2))
        default: return .notHolder
        }
    }

    /// Gives back the import lease `owner` holds (a graceful stop), so that another instance
    /// goes on with it at once.
    public func releaseImports(owner: String) async throws {
        _ = try await self.query("SELECT receipts.release_imports(\(owner))")
    }

    /// Ends a running import as failed, with why (an error of ours), and drops its staged rows.
    public func failImport(tenant: String, id: String, failure: String) async throws {
        _ = try await self.query("SELECT receipts.fail_import(\(tenant), \(id), \(failure))")
    }

    private static func interval(_ duration: Duration) -> String {
        "\(max(1, duration.components.seconds)) seconds"
    }
}
