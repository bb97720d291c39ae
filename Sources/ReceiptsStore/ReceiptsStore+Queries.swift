import Postgres

/// The store's statements with their values interpolated (`PostgresQuery`): each value is
/// the next placeholder, so values and placeholders cannot drift apart.
extension ReceiptsStore {
    /// `query(_:_:)`: one statement, retried after a deadlock or a serialization failure.
    func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await self.query(query.sql, query.binds)
    }

    /// `write(_:_:)`: one statement that may add events.
    func write(_ query: PostgresQuery) async throws -> PostgresRows {
        try await self.write(query.sql, query.binds)
    }

    /// `maintenanceQuery(_:_:timeout:)`: background maintenance, on a connection of its own.
    func maintenanceQuery(_ query: PostgresQuery, timeout: Duration = .seconds(600)) async throws -> PostgresRows {
        try await self.maintenanceQuery(query.sql, query.binds, timeout: timeout)
    }
}
