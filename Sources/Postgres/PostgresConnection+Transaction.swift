import Logging

extension PostgresConnection {
    /// Transaction isolation levels (PostgreSQL manual, "Transaction Isolation").
    public enum IsolationLevel: Sendable {
        case readCommitted
        case repeatableRead
        case serializable

        var beginStatement: String {
            switch self {
            case .readCommitted: "BEGIN"
            case .repeatableRead: "BEGIN ISOLATION LEVEL REPEATABLE READ"
            case .serializable: "BEGIN ISOLATION LEVEL SERIALIZABLE"
            }
        }
    }

    /// Runs `body` in a transaction: commits when it returns, rolls back when it throws.
    ///
    /// The transaction takes the connection's role, and on a connection leased within a
    /// `PostgresDeadline` scope its statements may run only until that deadline
    /// (`statement_timeout`), both set in its `BEGIN`'s round trip.
    ///
    /// A `COMMIT` that the server turns into a rollback (because a statement failed and the
    /// error was swallowed) throws instead of passing silently.
    @discardableResult
    public func withTransaction<Result>(
        isolation level: IsolationLevel = .readCommitted,
        caller: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let statement = level.beginStatement
        try await self.call { connection throws(PostgresError) in try await connection.begin(statement) }
        let result: Result
        do {
            result = try await body(self)
        } catch {
            // Not after a call abandoned at its deadline (it may still run); past the
            // deadline the rollback fails at once, and the pool closes the connection.
            if !self.hasAbandonedCall, self.isOpen {
                do {
                    try await self.executeScript("ROLLBACK")
                } catch let rollbackError {
                    self.logger.debug("rollback failed", metadata: ["error": "\(rollbackError)"])
                }
            }
            throw error
        }
        let tag = try await self.executeScript("COMMIT")
        guard tag == "COMMIT" else {
            throw PostgresError(
                code: .server,
                message: "the transaction was rolled back because a statement in it failed",
                sqlState: "25P02"
            )
        }
        return result
    }
}
