internal import CLibPQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// libpq's single-row mode: a statement's rows handed over one by one as they arrive, so that
/// the caller works on the first rows while the server is still sending the rest.
extension LibPQConnection {
    /// Runs one statement and calls `body` with each of its rows as it arrives, in the order
    /// the server sends them.
    ///
    /// - Returns: the error `body` threw, if it threw; the statement's remaining rows were
    ///   then read and dropped, and `body` was not called again.
    /// - Throws: the statement's error (`body` may have seen some of its rows before it came).
    func execute(_ sql: String, bindings: PostgresBindings, eachRow body: (PostgresRow) throws -> Void) async throws(PostgresError) -> (any Error)? {
        if PQtransactionStatus(self.handle) == PQTRANS_IDLE, self.policy.role != nil {
            // A transaction of its own that takes the role first (`execute(_:bindings:)`): all
            // rows at once, through the pipeline that sets it up.
            let rows = try await self.execute(sql, bindings: bindings)
            do {
                for row in rows { try body(row) }
                return nil
            } catch {
                return error
            }
        }
        let statementName = try await self.preparedStatementName(for: sql, types: bindings.types)
        let values = bindings.values.map { $0.map { strdup($0) } ?? nil }
        defer { values.forEach { free($0) } }
        let valuePointers = values.map { UnsafePointer($0) }
        guard PQsendQueryPrepared(self.handle, statementName, Int32(values.count), valuePointers, nil, nil, 1) == 1 else {
            throw self.connectionError()
        }
        // Refused only when not right after a send, as it is here; even then the loop below
        // reads the rows, all in one result.
        _ = PQsetSingleRowMode(self.handle)
        var failure: PostgresError?
        var bodyFailure: (any Error)?
        var columns: [PostgresColumn]?
        // Each row's result (`PGRES_SINGLE_TUPLE`), then the statement's end (`PGRES_TUPLES_OK`,
        // without rows) or its error, then nil.
        while true {
            guard let result = try await self.nextResult() else { break }
            let status = PQresultStatus(result)
            guard status == PGRES_SINGLE_TUPLE || status == PGRES_TUPLES_OK else {
                failure = failure ?? self.serverError(from: result)
                PQclear(result)
                continue
            }
            guard failure == nil, bodyFailure == nil else {
                PQclear(result)
                continue
            }
            do {
                let rows = try self.consume(result, columns: columns)
                columns = rows.columns
                for row in rows { try body(row) }
            } catch {
                bodyFailure = error
            }
        }
        if let failure { throw failure }
        guard self.isOpen else { throw self.connectionError() }
        return bodyFailure
    }
}
