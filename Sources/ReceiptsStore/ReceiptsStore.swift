import CoreMetrics
import Logging
import Postgres
import ServiceLifecycle
import Tracing

/// SQL access for the service: one method per use case.
///
/// Writes are single calls of the functions in `sql/functions`
/// (one round trip, one transaction each); reads that need several queries run in one
/// read-only transaction. Every call is scoped to a tenant (`receipts.enter_tenant`) and
/// every transaction of the pool's sessions takes the role `receipts_service` (`SET LOCAL
/// ROLE`), so row-level security enforces isolation even if a query here forgot its
/// `tenant_id`.
///
/// As a `Service`, it runs the batchers that gather a tenant's concurrent reads, sends and deletes
/// (`TenantBatcher`); the application runs it after the pool, so it stops before the pool
/// closes. A store whose service does not run batches alike: the service only lets shutdown
/// wait for the batches under way, or cancel them.
public struct ReceiptsStore: Service, Sendable {
    /// The role tenant work runs as; created by the first migration.
    public static let serviceRole = "receipts_service"
    /// The channel the event log's triggers notify.
    public static let eventChannel = "receipts_events"
    /// The session setting that keeps the triggers from notifying: for a pool whose writes
    /// reach the event hub through `committedWrites` (see sql/functions/events.sql).
    public static let silentTriggers = (name: "receipts.notify", value: "off")

    /// The session setting that lets a member of `maintenanceRole` see every tenant's rows
    /// (see "Row-level security" in sql/migrations/0001_baseline.sql); never open to `serviceRole`.
    public static let allTenants = (name: "receipts.all_tenants", value: "on")
    /// The role whose members may work across tenants with `allTenants` (the role that runs
    /// the migrations is one); created by the baseline migration.
    public static let maintenanceRole = "receipts_maintenance"

    /// `database` as the service's pool opens it:
    /// - every transaction runs as `serviceRole`, which row-level security applies to;
    /// - the triggers send no NOTIFY (the event hub hears of the pool's writes through
    ///   `committedWrites`, and tells other instances itself);
    /// - no statement runs longer than `timeout` (`statement_timeout`: a lock held elsewhere
    ///   makes a request fail with 503 instead of hanging), and a session left idle inside a
    ///   transaction for as long is ended by the server (`idle_in_transaction_session_timeout`),
    ///   so a stuck request cannot hold row locks. The longest statement of the service, a
    ///   read-all of a 10,000-message chat, takes well under a second (see
    ///   `DatabaseTimeoutTests`).
    public static func serviceSessions(of database: PostgresConfiguration, timeout: Duration = .seconds(5)) -> PostgresConfiguration {
        var sessions = database
        sessions.role = Self.serviceRole
        let milliseconds = String(max(1, timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000))
        sessions.settings = [
            Self.silentTriggers,
            (name: "statement_timeout", value: milliseconds),
            (name: "idle_in_transaction_session_timeout", value: milliseconds),
        ]
        return sessions
    }

    /// The primary's pool; a standby's in a copy made by `reading(from:)`.
    private(set) var pool: PostgresConnectionPool
    public let logger: Logger
    /// Where the primary's log stands after a write: its consistency token (`PositionProbe`).
    public let commitPositions: PositionProbe
    /// Signalled after every write that may have added events.
    public let committedWrites = CommittedWrites()
    /// Concurrent reads of a tenant, marked together (one request per chat and user at a
    /// time, as `receipts.mark_read_each` takes them), by two runs at once: a run's batches
    /// follow each other on one connection, so one run keeps one database backend busy; a
    /// second lets a busy tenant's reads use another core (batches of 100 ids on 2 cores:
    /// 10× the raw guarded UPDATE with one run, 15× with two, no more with three).
    let reads = TenantBatcher<ReadRequest, MarkReadOutcome>(concurrentRuns: 2) { [$0.chat, $0.user] }
    /// Concurrent sends of a tenant, sent together (one per chat at a time, as
    /// `receipts.send_each` takes them).
    let sends = TenantBatcher<NewMessage, SendResult> { [$0.chat] }
    /// Concurrent deletes of a tenant's messages, deleted together (one per chat at a time:
    /// two runs never lock the same chat, as `receipts.delete_message_each` locks its chats).
    let deletes = TenantBatcher<DeleteRequest, DeleteMessageOutcome> { [$0.chat] }

    /// Every tenant's credentials in memory, for authentication (see `CredentialDirectory`).
    public let credentials: CredentialDirectory
    /// The requests of each batch statement, by kind (`runBatches`).
    let batchRequests: BatchRequestCounts
    /// The histogram of requests per batch statement, labelled `kind`: `reads`, `sends`, `deletes`.
    public static let batchRequestsMetric = "receipts_batch_requests"

    /// - Parameter metrics: where the store's metrics go (`batchRequestsMetric`); none by default.
    public init(
        pool: PostgresConnectionPool, logger: Logger, credentialOptions: CredentialDirectory.Options = .init(),
        metrics: any MetricsFactory = NOOPMetricsHandler.instance
    ) {
        self.pool = pool
        self.logger = logger
        self.commitPositions = .commits(on: pool)
        self.credentials = CredentialDirectory(pool: pool, options: credentialOptions)
        self.batchRequests = BatchRequestCounts(kinds: ["reads", "sends", "deletes"], factory: metrics)
    }

    /// This store reading from `standby` (a hot standby's pool, `StandbyReads`): for the
    /// reads a standby may serve (`chat`, `messages`, `message`, `unreadChats`), never for a
    /// write, which a standby refuses.
    public func reading(from standby: PostgresConnectionPool) -> ReceiptsStore {
        var store = self
        store.pool = standby
        return store
    }

    /// Runs the batchers until graceful shutdown (then the batches under way finish) or
    /// cancellation.
    public func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await self.reads.run() }
            group.addTask { try await self.sends.run() }
            group.addTask { try await self.deletes.run() }
        }
    }

    /// Runs `body` in a transaction scoped to `tenant`.
    func withTenant<Result: Sendable>(
        _ tenant: String,
        readOnly: Bool = false,
        _ body: @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await Self.traced(named: "transaction") {
            try await self.retryingConflicts {
                try await self.tenantTransaction(tenant, readOnly: readOnly, body)
            }
        }
    }

    private func tenantTransaction<Result: Sendable>(
        _ tenant: String, readOnly: Bool, _ body: @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await self.pool.withConnection { connection in
            let result = try await connection.withTransaction(isolation: readOnly ? .repeatableRead : .readCommitted) { connection in
                try await connection.execute("SELECT receipts.enter_tenant(\(tenant))")
                return try await body(connection)
            }
            // A write request's consistency token, on the same connection after the commit.
            if !readOnly { await CommitPositionSlot.recordPosition(on: connection) }
            return result
        }
    }

    /// Runs one statement, retrying it when PostgreSQL aborts it for a deadlock or a
    /// serialization failure (both leave nothing behind, so a retry is safe).
    ///
    /// It may write, and records no position: in a write request the token is then read after
    /// the request's statements (`CommitPositionSlot.ranUnrecorded()`).
    func query(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresRows {
        defer { CommitPositionSlot.current?.ranUnrecorded() }
        return try await Self.traced(named: BatchSpans.summary(of: sql)) {
            try await self.retryingConflicts { try await self.pool.query(sql, parameters) }
        }
    }

    /// Runs one statement of background maintenance (retention), which may take longer than
    /// the sessions' `statement_timeout` allows a request: on a connection of its own (set up
    /// as the pool's, but beyond the pool's watchdog), in a transaction whose statements may
    /// run for up to `timeout`.
    func maintenanceQuery(_ sql: String, _ parameters: [any PostgresEncodable], timeout: Duration = .seconds(600)) async throws -> PostgresRows {
        let connection = try await PostgresConnection.connect(to: self.pool.configuration, logger: self.logger)
        do {
            let rows = try await connection.withTransaction { connection in
                let statementTimeout = "\(timeout.components.seconds)s"
                try await connection.execute("SELECT set_config('statement_timeout', \(statementTimeout), true)")
                return try await connection.query(sql, parameters)
            }
            await connection.close()
            return rows
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Runs one statement that may add events, and signals `committedWrites` once it has
    /// ended (also when it failed: a commit whose answer was lost with the connection still
    /// added events, and a look at the log too many costs one query).
    ///
    /// In a write request (`CommitPositionSlot.current`), the position of the commit is read
    /// right after it on the same connection, for the request's consistency token.
    func write(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresRows {
        defer { self.committedWrites.signal() }
        guard CommitPositionSlot.current != nil else { return try await self.query(sql, parameters) }
        return try await Self.traced(named: BatchSpans.summary(of: sql)) {
            try await self.retryingConflicts {
                try await self.pool.withConnection { connection in
                    let rows = try await connection.query(sql, parameters)
                    await CommitPositionSlot.recordPosition(on: connection)
                    return rows
                }
            }
        }
    }

    /// Runs `operation` in a client span `name` (the function a statement calls:
    /// `BatchSpans.summary(of:)`, or "transaction"), when tracing is on.
    private static func traced<Result>(
        named name: @autoclosure () -> String, _ operation: () async throws -> Result
    ) async throws -> Result {
        guard ReceiptsTracing.isOn else { return try await operation() }
        return try await InstrumentationSystem.tracer.withSpan(name(), ofKind: .client) { span in
            span.attributes["db.system.name"] = "postgresql"
            return try await operation()
        }
    }

    private func retryingConflicts<Result>(_ operation: () async throws -> Result) async throws -> Result {
        var attempt = 1
        while true {
            do {
                return try await operation()
            } catch let error as PostgresError where error.isSerializationFailure && attempt < 5 {
                self.logger.debug("retrying after a conflict", metadata: ["postgres.sqlstate": "\(error.sqlState ?? "")"])
                attempt += 1
            }
        }
    }
}
