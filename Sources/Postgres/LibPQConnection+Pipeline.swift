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
    /// What the results of a transaction sent in pipeline mode are made of.
    struct PipelinedStatement {
        /// The prepared statements it runs, in order, and whether each was prepared in the
        /// same trip (the prepares' results come first, in the same order).
        var parts: [(key: PreparedStatements.Key, prepares: Bool)]
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
    func send(_ sql: String, bindings: PostgresBindings, setup: PreparedSetup? = nil) throws(PostgresError) {
        try self.send([(sql, bindings)], setup: setup)
    }

    /// Sends statements that share one transaction (one sync point after the last): they
    /// commit together, and the first that fails rolls them all back. (`receive()` answers
    /// each one's rows; only single statements are sent for now.)
    private func send(_ statements: [(sql: String, bindings: PostgresBindings)], setup: PreparedSetup?) throws(PostgresError) {
        let setup = setup ?? self.preparedSetup(self.policy.roleSetup)
        var parts: [(key: PreparedStatements.Key, prepares: Bool)] = []
        var names: [String] = []
        for statement in statements {
            let key = PreparedStatements.Key(sql: statement.sql, types: statement.bindings.types)
            if let name = self.preparedStatements.name(for: key) {
                parts.append((key, false))
                names.append(name)
                continue
            }
            let name = self.preparedStatements.reserveName()
            let sent = statement.bindings.types.withUnsafeBufferPointer { types in
                PQsendPrepare(self.handle, name, statement.sql, Int32(types.count), types.baseAddress)
            }
            guard sent == 1 else { throw self.sendFailure() }
            // Counted as prepared from now: statements sent after it in the pipeline use it.
            // If the prepare fails, `receive` forgets it again.
            self.preparedStatements.record(name, for: key)
            parts.append((key, true))
            names.append(name)
        }
        if let setup {
            let values = setup.values.map { strdup($0) }
            defer { values.forEach { free($0) } }
            let valuePointers = values.map { UnsafePointer($0) }
            guard PQsendQueryPrepared(self.handle, setup.statement, Int32(values.count), valuePointers, nil, nil, 1) == 1 else {
                throw self.sendFailure()
            }
        }
        for (statement, name) in zip(statements, names) {
            let values = statement.bindings.values.map { $0.map { strdup($0) } ?? nil }
            defer { values.forEach { free($0) } }
            let valuePointers = values.map { UnsafePointer($0) }
            guard PQsendQueryPrepared(self.handle, name, Int32(values.count), valuePointers, nil, nil, 1) == 1 else {
                throw self.sendFailure()
            }
        }
        guard PQpipelineSync(self.handle) == 1 else { throw self.sendFailure() }
        self.pipelineQueue.append(PipelinedStatement(parts: parts, takesRole: setup != nil))
    }

    /// Waits for the answer of the oldest transaction sent and not yet received: the rows of
    /// each of its statements, in order.
    ///
    /// - Throws: the first error of its statements, or `connectionClosed` when the
    ///   connection is lost.
    func receive() async throws(PostgresError) -> [PostgresRows] {
        guard !self.pipelineQueue.isEmpty else {
            throw PostgresError(code: .invalidValue, message: "no statement sent in the pipeline is waiting for its answer")
        }
        let statement = self.pipelineQueue.removeFirst()
        defer { if self.pipelineQueue.isEmpty { self.failedPreparations = [:] } }
        var failure: PostgresError?
        for part in statement.parts where part.prepares {
            let result = try await self.nextResult()
            guard let result else { throw self.connectionError() }
            if PQresultStatus(result) != PGRES_COMMAND_OK {
                let error = self.serverError(from: result)
                self.failedPreparations[part.key] = error
                self.preparedStatements.forget(part.key)
            } else {
                // Prepared again after an earlier failure: the statements that count on it now run.
                self.failedPreparations[part.key] = nil
            }
            PQclear(result)
            try await self.expectEndOfCommand()
        }
        // A statement sent after a failed prepare of its SQL fails for the same reason.
        for part in statement.parts {
            if let error = self.failedPreparations[part.key] { failure = failure ?? error }
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
        // Each statement's result: its rows, its error, or "aborted" after an earlier failure.
        var answers: [PostgresRows] = []
        for _ in statement.parts {
            let result = try await self.nextResult()
            guard let result else { throw self.connectionError() }
            if PQresultStatus(result) == PGRES_PIPELINE_ABORTED {
                PQclear(result)
                failure = failure ?? PostgresError(code: .server, message: "the statement was not run: an earlier one failed", host: self.server)
            } else {
                do {
                    answers.append(try self.consume(result))
                } catch {
                    failure = failure ?? error
                }
            }
            try await self.expectEndOfCommand()
        }
        // The sync point: the end of the transaction.
        let sync = try await self.nextResult()
        guard let sync else { throw self.connectionError() }
        let status = PQresultStatus(sync)
        PQclear(sync)
        guard status == PGRES_PIPELINE_SYNC else { throw self.unexpectedResult() }
        if let failure { throw failure }
        guard answers.count == statement.parts.count else { throw self.unexpectedResult() }
        return answers
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
