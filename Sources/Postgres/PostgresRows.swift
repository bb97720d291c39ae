/// A column of a result: its name and type.
public struct PostgresColumn: Sendable, Hashable {
    public let name: String
    public let type: PostgresDataType
}

/// The complete result of one statement, copied out of libpq's memory.
public struct PostgresRows: Sendable, RandomAccessCollection {
    public let columns: [PostgresColumn]
    /// Rows the statement inserted, updated or deleted (`PQcmdTuples`); 0 for others.
    public let affectedRows: Int
    /// All cell bytes, row after row.
    let storage: [UInt8]
    /// Per cell: where its bytes start in `storage` and how many there are (-1 for NULL).
    let cells: [(offset: Int, length: Int)]

    init(columns: [PostgresColumn], affectedRows: Int, storage: [UInt8], cells: [(offset: Int, length: Int)]) {
        self.columns = columns
        self.affectedRows = affectedRows
        self.storage = storage
        self.cells = cells
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { self.columns.isEmpty ? 0 : self.cells.count / self.columns.count }

    public subscript(position: Int) -> PostgresRow {
        PostgresRow(rows: self, index: position)
    }

    /// The index of the column called `name`.
    public func columnIndex(named name: String) throws(PostgresError) -> Int {
        guard let index = self.columns.firstIndex(where: { $0.name == name }) else {
            throw PostgresError(code: .noSuchColumn, message: "the result has no column \"\(name)\"")
        }
        return index
    }
}

/// One row of a result; decode its cells by position or by name.
public struct PostgresRow: Sendable {
    let rows: PostgresRows
    let index: Int

    /// Decodes the cell in `column` (0-based) as `type`.
    ///
    /// - Throws: `typeMismatch` if the column's type cannot become `T`, `unexpectedNull` for a
    ///   NULL unless `T` is optional.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, column: Int) throws(PostgresError) -> T {
        guard self.rows.columns.indices.contains(column) else {
            throw PostgresError(code: .noSuchColumn, message: "the result has no column \(column)")
        }
        let cell = self.rows.cells[self.index * self.rows.columns.count + column]
        let info = self.rows.columns[column]
        do {
            if cell.length < 0 { return try T.decodeNull() }
            let bytes = self.rows.storage[cell.offset..<(cell.offset + cell.length)]
            return try T.decode(from: bytes, type: info.type)
        } catch {
            var error = error
            error.message = "column \"\(info.name)\": \(error.message)"
            throw error
        }
    }

    /// Decodes the cell of the column called `name` as `type`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, column name: String) throws(PostgresError) -> T {
        try self.decode(type, column: try self.rows.columnIndex(named: name))
    }

    /// Whether the cell in `column` is SQL NULL.
    public func isNull(column: Int) -> Bool {
        self.rows.cells[self.index * self.rows.columns.count + column].length < 0
    }
}

extension PostgresRows {
    /// The single value of a one-row, one-column result (e.g. `SELECT count(*) …`).
    public func scalar<T: PostgresDecodable>(_ type: T.Type = T.self) throws(PostgresError) -> T {
        guard let row = self.first else {
            throw PostgresError(code: .invalidValue, message: "expected one row, the statement returned none")
        }
        return try row.decode(type, column: 0)
    }
}
