internal import CLibPQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// libpq's pipeline mode: statements sent before the answers of earlier ones have come, so
/// that the server starts the next one as soon as it has finished the last.
///
/// Each statement is sent with a sync point of its own, so each one is its own transaction
/// (as `execute` outside a pipeline) and a failing one aborts no other. On a connection with
/// a role (`policy.role`), each such transaction takes the role first, in the same trip.
extension LibPQConnection {
    /// What the results of a statement sent in pipeline mode begin with.
    struct PipelinedStatement {
        /// The prepared statement it runs.
        var key: PreparedStatements.Key
        /// Whether it was prepared in the same trip: the prepare's result comes first.
        var prepares: Bool
        /// Whether its transaction is set up first (`SessionPolicy`: the role, the statement
        /// timeout): that statement's result comes next.
        var takesRole: Bool
    }

    /// Enters pipeline mode; the connection must be idle.
    func enterPipelineMode() throws(PostgresError) {
        guard PQenterPipelineMode(self.handle) == 1 else { throw self.connectionError() }
    }

    /// Receives what is left of the statements sent, then leaves pipeline mode. On failure
    /// the connection stays in pipeline mode, which the pool takes as not reusable.
    func leavePipelineMode() async {
        while !self.pipelineQueue.isEmpty {
            do {
                _ = try await self.receive()
            } catch where error.code == .connectionClosed {
                return
            } catch {
                continue  // the statement failed; its transaction has ended
            }
        }
        _ = PQexitPipelineMode(self.handle)
    }

    /// Sends one statement and its sync point without waiting for its answer. A statement
    /// not yet prepared on this connection is prepared in the same trip.
    /// - Parameter setup: what its transaction runs first (`transactionSetup()` or
    ///   `timeoutSetup(milliseconds:)`, prepared before the pipeline began); by default the
    ///   role alone (`SessionPolicy.roleSetup`), if the connection has one.
    /// - Parameter takesRole: false for a statement that reads no table: no setup then.
    func send(_ sql: String, bindings: PostgresBindings, setup: PreparedSetup? = nil, takesRole: Bool = true) throws(PostgresError) {
        let setup = takesRole ? setup ?? self.preparedSetup(self.policy.roleSetup) : nil
        let key = PreparedStatements.Key(sql: sql, types: bindings.types)
        let prepares = self.preparedStatements.name(for: key) == nil
        let statementName: String
        if let name = self.preparedStatements.name(for: key) {
            statementName = name
        } else {
            statementName = self.preparedStatements.reserveName()
            let sent = bindings.types.withUnsafeBufferPointer { types in
                PQsendPrepare(self.handle, statementName, sql, Int32(types.count), types.baseAddress)
            }
            guard sent == 1 else { throw self.sendFailure() }
            // Counted as prepared from now: statements sent after it in the pipeline use it.
            // If the prepare fails, `receive` forgets it again.
            self.preparedStatements.record(statementName, for: key)
        }
        if let setup {
            let values = setup.values.map { strdup($0) }
            defer { values.forEach { free($0) } }
            let valuePointers = values.map { UnsafePointer($0) }
            guard PQsendQueryPrepared(self.handle, setup.statement, Int32(values.count), valuePointers, nil, nil, 1) == 1 else {
                throw self.sendFailure()
            }
        }
        let values = bindings.values.map { $0.map { strdup($0) } ?? nil }
        defer { values.forEach { free($0) } }
        let valuePointers = values.map { UnsafePointer($0) }
        guard PQsendQueryPrepared(self.handle, statementName, Int32(values.count), valuePointers, nil, nil, 1) == 1,
            PQpipelineSync(self.handle) == 1
        else { throw self.sendFailure() }
        self.pipelineQueue.append(PipelinedStatement(key: key, prepares: prepares, takesRole: setup != nil))
    }

    /// Waits for the answer of the oldest statement sent and not yet received.
    ///
    /// - Throws: the statement's error, or `connectionClosed` when the connection is lost.
    func receive() async throws(PostgresError) -> PostgresRows {
        guard !self.pipelineQueue.isEmpty else {
            throw PostgresError(code: .invalidValue, message: "no statement sent in the pipeline is waiting for its answer")
        }
        let statement = self.pipelineQueue.removeFirst()
        defer { if self.pipelineQueue.isEmpty { self.failedPreparations = [:] } }
        // A statement sent after a failed prepare of its SQL fails for the same reason.
        var failure = statement.prepares ? nil : self.failedPreparations[statement.key]
        if statement.prepares {
            let result = try await self.nextResult()
            guard let result else { throw self.connectionError() }
            if PQresultStatus(result) != PGRES_COMMAND_OK {
                let error = self.serverError(from: result)
                failure = error
                self.failedPreparations[statement.key] = error
                self.preparedStatements.forget(statement.key)
            }
            PQclear(result)
            try await self.expectEndOfCommand()
        }
        if statement.takesRole {
            let result = try await self.nextResult()
            guard let result else { throw self.connectionError() }
            let status = PQresultStatus(result)
            if status != PGRES_TUPLES_OK && status != PGRES_PIPELINE_ABORTED {
                failure = failure ?? self.serverError(from: result)
            }
            PQclear(result)
            try await self.expectEndOfCommand()
        }
        // The statement's result: its rows, its error, or "aborted" after a failed prepare.
        let result = try await self.nextResult()
        guard let result else { throw self.connectionError() }
        var rows: PostgresRows?
        if PQresultStatus(result) == PGRES_PIPELINE_ABORTED {
            PQclear(result)
            failure = failure ?? PostgresError(code: .server, message: "the statement was not run: an earlier one failed", host: self.server)
        } else {
            do {
                rows = try self.consume(result)
            } catch {
                failure = failure ?? error
            }
        }
        try await self.expectEndOfCommand()
        // The sync point: the end of the statement's transaction.
        let sync = try await self.nextResult()
        guard let sync else { throw self.connectionError() }
        let status = PQresultStatus(sync)
        PQclear(sync)
        guard status == PGRES_PIPELINE_SYNC else { throw self.unexpectedResult() }
        if let failure { throw failure }
        guard let rows else { throw self.unexpectedResult() }
        return rows
    }

    /// The null result that ends a command's results.
    private func expectEndOfCommand() async throws(PostgresError) {
        guard let extra = try await self.nextResult() else { return }
        PQclear(extra)
        throw self.unexpectedResult()
    }

    /// libpq refused to queue a message: the connection is broken, or libpq's queue may no
    /// longer match `pipelineQueue`. Either way the connection must not be used again, so the
    /// error counts as a lost connection (the pool discards a connection left in pipeline
    /// mode).
    private func sendFailure() -> PostgresError {
        let reason = self.connectionError()
        return PostgresError(code: .connectionClosed, message: reason.message, host: self.server)
    }

    private func unexpectedResult() -> PostgresError {
        guard self.isOpen else { return self.connectionError() }
        return PostgresError(code: .connectionClosed, message: "libpq answered out of order in pipeline mode", host: self.server)
    }
}
