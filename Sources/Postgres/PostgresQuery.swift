/// A statement and its values, written as one string whose interpolations are the values:
/// each becomes the next placeholder (`$1`, `$2`, …) and is bound to it, so a value can never
/// end up in the SQL text, nor a placeholder drift from its value.
///
/// ```swift
/// let rows = try await connection.query("SELECT seq FROM receipts.messages WHERE tenant_id = \(tenant) AND id = \(id)")
/// ```
///
/// Only values can be interpolated (`PostgresEncodable`); the SQL around them is literal text.
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation {
    /// The statement, with `$n` where the values go.
    public let sql: String
    /// The values, in placeholder order.
    public let binds: [any PostgresEncodable]

    public init(stringLiteral sql: String) {
        self.sql = sql
        self.binds = []
    }

    public init(stringInterpolation: StringInterpolation) {
        self.sql = stringInterpolation.sql
        self.binds = stringInterpolation.binds
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var binds: [any PostgresEncodable] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            self.sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            self.binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) {
            self.sql += literal
        }

        /// `value` as the next placeholder.
        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            self.binds.append(value)
            self.sql += "$\(self.binds.count)"
        }

        /// `value` as the next placeholder, NULL when it is nil.
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?) {
            self.binds.append(value)
            self.sql += "$\(self.binds.count)"
        }
    }
}

extension PostgresConnection {
    /// Runs `query` (prepared once per connection, then reused) and returns its rows.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await self.query(query.sql, query.binds)
    }

    /// Runs `query` and returns how many rows it inserted, updated or deleted.
    @discardableResult
    public func execute(_ query: PostgresQuery) async throws -> Int {
        try await self.query(query.sql, query.binds).affectedRows
    }
}

extension PostgresConnectionPool {
    /// Runs `query` on a pooled connection and returns its rows.
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await self.query(query.sql, query.binds)
    }

    /// Runs `query` on a pooled connection and returns how many rows it changed.
    @discardableResult
    public func execute(_ query: PostgresQuery) async throws -> Int {
        try await self.execute(query.sql, query.binds)
    }
}

extension PostgresRow {
    /// Decodes the row's cells, in order, as the types of a tuple:
    /// `let (seq, createdAt) = try row.decode((Int64, Date).self)`. The result must have
    /// exactly as many columns.
    public func decode<each Column: PostgresDecodable>(_ types: (repeat each Column).Type) throws -> (repeat each Column) {
        var column = 0
        func next<Value: PostgresDecodable>(_ type: Value.Type) throws -> Value {
            defer { column += 1 }
            return try self.decode(type, column: column)
        }
        let values = (repeat try next((each Column).self))
        guard column == self.rows.columns.count else {
            throw PostgresError(
                code: .noSuchColumn, message: "the result has \(self.rows.columns.count) columns, the row is read as \(column)")
        }
        return values
    }
}

extension PostgresRows {
    /// Each row decoded as the types of a tuple (`PostgresRow.decode(_:)`).
    public func decode<each Column: PostgresDecodable>(_ types: (repeat each Column).Type) throws -> [(repeat each Column)] {
        try self.map { try $0.decode(types) }
    }
}

extension PostgresConnection {
    /// Runs `query` and folds its rows into `initial` one by one as they arrive
    /// (`reduceRows(_:_:into:_:)`).
    public func reduceRows<State: Sendable>(
        _ query: PostgresQuery,
        into initial: State,
        _ update: @escaping @Sendable (inout State, PostgresRow) throws -> Void
    ) async throws -> State {
        try await self.reduceRows(query.sql, query.binds, into: initial, update)
    }
}
