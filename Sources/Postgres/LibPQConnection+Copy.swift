internal import CLibPQ

/// `COPY … FROM STDIN` on the wire: the statement, then the data in `CopyData` messages,
/// then the end (or an abort), then the statement's result.
///
/// Each step is a call of its own (`PostgresConnection.copyFrom` runs each one through
/// `call`), so that the time the caller takes to produce the data between two steps is not
/// a wait on the server. As everywhere in this class, no step blocks a thread: data is queued
/// in libpq's output buffer and sent by `flushOutput()`, which suspends while the server does
/// not take it, and results are read with `nextResult()`.
extension LibPQConnection {
    /// A COPY under way, as `startCopy` began it.
    struct CopyIn {
        /// Whether `startCopy` opened a transaction for the COPY (to set the session up in it
        /// first), which `endCopy` commits or rolls back.
        var ownsTransaction: Bool
    }

    /// Sends `sql`, a `COPY … FROM STDIN`, and waits until the server is ready for its data.
    ///
    /// Outside a transaction, on a session with a role or a call's statement timeout
    /// (`transactionSetup()`), the COPY runs in a transaction of its own that sets them up
    /// first, as `execute` does. It cannot share the setup's round trip (COPY is not allowed in
    /// pipeline mode, and values are bound, never spliced into a script), so the transaction
    /// is opened by `begin`, a round trip more: nothing beside the data a COPY sends.
    ///
    /// - Throws: the server's error for the statement (the connection is then out of the
    ///   COPY, and out of the transaction opened here); `invalidValue` for a statement that
    ///   is not a `COPY … FROM STDIN`, or in pipeline mode (libpq does not allow it).
    func startCopy(_ sql: String) async throws(PostgresError) -> CopyIn {
        guard PQpipelineStatus(self.handle) == PQ_PIPELINE_OFF else {
            throw PostgresError(code: .invalidValue, message: "a COPY cannot run in pipeline mode", host: self.server)
        }
        var copy = CopyIn(ownsTransaction: false)
        if PQtransactionStatus(self.handle) == PQTRANS_IDLE, self.policy.transactionSetup != nil {
            do {
                try await self.begin("BEGIN")
            } catch {
                await self.rollBackOwnTransaction()
                throw error
            }
            copy.ownsTransaction = true
        }
        do {
            try await self.sendCopy(sql)
        } catch {
            if copy.ownsTransaction { await self.rollBackOwnTransaction() }
            throw error
        }
        return copy
    }

    /// Sends the COPY statement and reads its first result, which must say the server waits
    /// for data (`PGRES_COPY_IN`).
    private func sendCopy(_ sql: String) async throws(PostgresError) {
        // Extended protocol, no parameters: one statement only, as `execute` runs.
        guard PQsendQueryParams(self.handle, sql, 0, nil, nil, nil, nil, 0) == 1 else { throw self.connectionError() }
        guard let result = try await self.nextResult() else { throw self.connectionError() }
        let status = PQresultStatus(result)
        if status == PGRES_COPY_IN {
            PQclear(result)
            return
        }
        let failure: PostgresError
        switch status {
        case PGRES_COPY_OUT, PGRES_COPY_BOTH:
            // Its data would have to be read to the end first: the connection is not worth it.
            PQclear(result)
            self.isBroken = true
            throw PostgresError(code: .invalidValue, message: "copyFrom needs a COPY … FROM STDIN, not a COPY that sends data", host: self.server)
        case PGRES_FATAL_ERROR, PGRES_BAD_RESPONSE, PGRES_NONFATAL_ERROR:
            failure = self.serverError(from: result)
        default:
            failure = PostgresError(code: .invalidValue, message: "copyFrom needs a COPY … FROM STDIN statement", host: self.server)
        }
        PQclear(result)
        // The statement's other results, up to its end: the connection is ready again after.
        PQclear(try await self.lastResult())
        throw failure
    }

    /// Queues `bytes` as COPY data and sends them, suspending while the server does not take
    /// them: the server's pace holds the producer back, and libpq's buffer never grows past
    /// one write.
    ///
    /// - Throws: `connectionClosed` (the connection is marked broken); `deadlineExceeded`.
    func putCopyData(_ bytes: [UInt8]) async throws(PostgresError) {
        // Messages of at most 1 MiB: libpq takes an Int32 length.
        var start = 0
        repeat {
            let end = min(bytes.count, start + Self.copyMessageLimit)
            try await self.putCopyMessage(bytes[start..<end])
            start = end
        } while start < bytes.count
    }

    private static let copyMessageLimit = 1 << 20

    private func putCopyMessage(_ bytes: ArraySlice<UInt8>) async throws(PostgresError) {
        while true {
            let queued = bytes.withUnsafeBytes { bytes in
                PQputCopyData(self.handle, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(bytes.count))
            }
            switch queued {
            case 1:
                try await self.flushOutput()
                return
            case 0:
                // libpq's buffer is full (non-blocking mode): send it, then queue again.
                try await self.flushOutput()
            default:
                throw self.copyRefused()
            }
        }
    }

    /// Ends the COPY: its data is complete (`reason` nil) or the COPY is aborted with
    /// `reason`, which the server reports in its error. Reads the statement's results to the
    /// end, then commits or rolls back the transaction `startCopy` opened, if it did.
    ///
    /// - Returns: the rows copied.
    /// - Throws: the server's error (a bad row: the data's error, e.g. 22P02; after an abort,
    ///   57014). The connection is then out of the COPY; a transaction of the caller's is
    ///   left aborted, for the caller to roll back.
    func endCopy(_ copy: CopyIn, abortingWith reason: String? = nil) async throws(PostgresError) -> Int {
        let rows: Result<Int, PostgresError>
        do throws(PostgresError) {
            rows = .success(try await self.finishCopy(abortingWith: reason))
        } catch {
            rows = .failure(error)
        }
        guard copy.ownsTransaction else { return try rows.get() }
        if case .failure(let error) = rows {
            await self.rollBackOwnTransaction()
            throw error
        }
        // As `PostgresConnection.withTransaction`: a COMMIT the server turned into a rollback throws.
        guard try await self.executeScript("COMMIT") == "COMMIT" else {
            throw PostgresError(code: .server, message: "the COPY's transaction was rolled back", sqlState: "25P02", host: self.server)
        }
        return try rows.get()
    }

    /// Sends the end of the COPY and reads its results up to their end.
    private func finishCopy(abortingWith reason: String?) async throws(PostgresError) -> Int {
        while true {
            let sent = PQputCopyEnd(self.handle, reason)
            if sent == 1 { break }
            guard sent == 0 else { throw self.copyRefused() }
            // libpq's buffer is full (non-blocking mode): send it, then queue the end again.
            try await self.flushOutput()
        }
        // `nextResult` sends what is queued first. "COPY n": `consume` reads n.
        return try self.consume(try await self.lastResult()).affectedRows
    }

    /// Marks the connection broken when a COPY failed half-way (a write or its end never ran:
    /// a lost connection, a deadline passed between two writes) and the connection is still
    /// in it, or in the transaction `startCopy` opened: nothing may run on it again, and the
    /// pool closes it, which ends the COPY on the server.
    func abandonUnfinishedCopy(_ copy: CopyIn) {
        let status = PQtransactionStatus(self.handle)
        if status == PQTRANS_ACTIVE || (copy.ownsTransaction && status != PQTRANS_IDLE) {
            self.isBroken = true
        }
    }

    /// Rolls back the transaction `startCopy` opened, unless the connection is broken (lost,
    /// or past its deadline: nothing more can be sent). A failure leaves the connection in
    /// the transaction, which the pool does not lend again (`isIdle`).
    private func rollBackOwnTransaction() async {
        guard !self.isBroken, PQtransactionStatus(self.handle) != PQTRANS_IDLE else { return }
        _ = try? await self.executeScript("ROLLBACK")
    }

    /// libpq refused to queue COPY data or its end: the connection is lost, or libpq is not in
    /// the COPY any more. Either way it must not be used again.
    private func copyRefused() -> PostgresError {
        self.isBroken = true
        return PostgresError(code: .connectionClosed, message: "connection to \(self.server): \(Self.errorText(of: self.handle))", host: self.server)
    }
}
