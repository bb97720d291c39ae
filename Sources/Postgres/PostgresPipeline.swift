import NIOCore

/// Statements sent to PostgreSQL ahead of the answers to earlier ones (libpq's pipeline
/// mode), for a caller that runs statements back to back: the server starts each one as
/// soon as it has finished the one before, instead of waiting for the client to read the
/// answer and send the next.
///
/// Each statement is its own transaction, as with `PostgresConnection.query`; one that
/// fails aborts no other. Answers come in the order the statements were sent.
///
/// Lent by `PostgresConnection.withPipeline(_:)` to a closure: `send` only queues (libpq's
/// non-blocking mode), `receive` sends what is queued and suspends until the answer comes;
/// the pipeline must not be used after the closure returns.
public struct PostgresPipeline {
    let connection: LibPQConnection

    /// Sends a statement (prepared once per connection, then reused) without waiting for
    /// its answer. Values are bound to `$1`, `$2`, … in order.
    public func send(_ sql: String, _ parameters: [any PostgresEncodable]) throws(PostgresError) {
        try self.connection.send(sql, bindings: try PostgresBindings(parameters))
    }

    /// Sends a statement that reads no table, without the role every other transaction takes
    /// first (`PostgresConfiguration.role`): one statement less for the server to run, for
    /// a statement that needs no privilege (`SELECT pg_current_wal_flush_lsn()`, say).
    public func sendWithoutRole(_ sql: String, _ parameters: [any PostgresEncodable]) throws(PostgresError) {
        try self.connection.send(sql, bindings: try PostgresBindings(parameters), takesRole: false)
    }

    /// Sends a statement that the server must end by `deadline`: its transaction sets
    /// `statement_timeout` to the time left now (`SET LOCAL`, in the same trip). nil: the
    /// session's own `statement_timeout` applies, as with `send(_:_:)`.
    ///
    /// The server starts the timer when it starts the statement, after those sent before it:
    /// a statement queued behind a slow one may end later than `deadline` by that wait.
    public func send(_ sql: String, _ parameters: [any PostgresEncodable], by deadline: NIODeadline?) throws(PostgresError) {
        try self.connection.send(sql, bindings: try PostgresBindings(parameters), setup: self.timeoutSetup(by: deadline))
    }

    /// `send(_:_:by:)` that also sets the run-time parameter `setting` for the statement's
    /// transaction (`SET LOCAL`, in the same setup statement): what the statement's triggers
    /// read with `current_setting`. Without a deadline, the statement is bounded by the
    /// session's own `statement_timeout` only (none if it has none).
    public func send(
        _ sql: String, _ parameters: [any PostgresEncodable], by deadline: NIODeadline?, setting: (name: String, value: String)
    ) throws(PostgresError) {
        let milliseconds = deadline.map(Self.milliseconds(until:)) ?? Int(Int32.max)
        try self.connection.send(
            sql, bindings: try PostgresBindings(parameters), setup: self.connection.timeoutSetup(milliseconds: milliseconds, setting: setting))
    }

    /// Waits for the answer to the oldest statement sent and not yet received.
    ///
    /// - Throws: the statement's error; `connectionClosed` when the connection is lost (the
    ///   statements not yet received may or may not have run).
    public func receive() async throws(PostgresError) -> PostgresRows {
        try await self.connection.receive()
    }

    /// What a transaction that must end by `deadline` runs first (nil: the session's own).
    private func timeoutSetup(by deadline: NIODeadline?) -> LibPQConnection.PreparedSetup? {
        guard let deadline else { return nil }
        return self.connection.timeoutSetup(milliseconds: Self.milliseconds(until: deadline))
    }

    /// Whole milliseconds to `deadline`, rounded up, and at least one (0 would mean no timeout).
    private static func milliseconds(until deadline: NIODeadline) -> Int {
        let left = deadline - NIODeadline.now()
        return max(1, Int((left.nanoseconds + 999_999) / 1_000_000))
    }

    /// How many statements have been sent and not yet received.
    public var waiting: Int { self.connection.pipelineQueue.count }
}

extension PostgresConnection {
    /// Runs `body` with a pipeline to send statements through.
    ///
    /// Answers `body` left unread are read (and dropped) before the connection leaves
    /// pipeline mode. Meant for work that keeps the database busy. The lease's deadline does
    /// not bound it (see `PostgresConnectionPool`): each statement in it is bounded by the
    /// session's `statement_timeout` (or the one `send(_:_:by:)` sets) and the pool's watchdog.
    public func withPipeline<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresPipeline) async throws -> Result
    ) async throws -> Result {
        let connection = self.connection
        try await self.call(bounded: false) { connection throws(PostgresError) in
            // Prepared now: a statement cannot be prepared synchronously in pipeline mode.
            try await connection.prepareTimeoutSetup()
            try connection.enterPipelineMode()
        }
        let outcome: Swift.Result<Result, any Error>
        do {
            // Not bounded by the lease's deadline: a pipeline may serve one batch after
            // another for longer (ReceiptsStore's batch runs).
            let result = try await withTaskCancellationHandler {
                try await body(PostgresPipeline(connection: connection))
            } onCancel: {
                self.cancelRunningCall()
            }
            outcome = .success(result)
        } catch {
            outcome = .failure(error)
        }
        await connection.leavePipelineMode()
        return try outcome.get()
    }
}
