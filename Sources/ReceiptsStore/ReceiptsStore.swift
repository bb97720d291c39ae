import Logging
import Postgres

/// SQL access for the service: one method per use case.
///
/// Writes are single calls of the functions in `sql/migrations/0002_receipt_functions.sql`
/// (one round trip, one transaction each); reads that need several queries run in one
/// read-only transaction. Every call is scoped to a tenant (`receipts.enter_tenant`) and the
/// pool's sessions run as `receipts_service`, so row-level security enforces isolation
/// even if a query here forgot its `tenant_id`.
public struct ReceiptsStore: Sendable {
    /// The role tenant work runs as; created by the first migration.
    public static let serviceRole = "receipts_service"

    let pool: PostgresConnectionPool
    let logger: Logger

    public init(pool: PostgresConnectionPool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    /// Runs `body` in a transaction scoped to `tenant`.
    func withTenant<Result: Sendable>(
        _ tenant: String,
        readOnly: Bool = false,
        _ body: @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await self.retryingConflicts {
            try await self.pool.withTransaction(isolation: readOnly ? .repeatableRead : .readCommitted) { connection in
                try await connection.execute("SELECT receipts.enter_tenant($1)", [tenant])
                return try await body(connection)
            }
        }
    }

    /// Runs one statement, retrying it when PostgreSQL aborts it for a deadlock or a
    /// serialization failure (both leave nothing behind, so a retry is safe).
    func query(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresRows {
        try await self.retryingConflicts { try await self.pool.query(sql, parameters) }
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
