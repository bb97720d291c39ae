extension PostgresConnection {
    /// Runs `COPY … FROM STDIN` (`sql`, in text or CSV format as it says) with the data
    /// `produce` writes, and returns the rows copied: for loading many rows at once, far
    /// faster than one `INSERT` each.
    ///
    /// The data goes to the server as `produce` writes it, in pieces of some 64 KiB, each
    /// sent as a call of its own (`call`: the lease's deadline and the task's cancellation
    /// apply), so that `produce` may take its time between writes (reading a request body,
    /// say) without it counting as a wait on the database. `PostgresCopyText` writes fields in
    /// the text format.
    ///
    /// Outside a transaction the COPY is a transaction of its own: it copies every row or none.
    ///
    /// - Throws: the server's error (a bad row, e.g. SQLSTATE 22P02), after which the
    ///   connection is usable again, and a transaction it runs in is aborted (roll it back);
    ///   the error `produce` threw, after the COPY was aborted (nothing copied).
    @discardableResult
    public func copyFrom(
        _ sql: String,
        isolation: isolated (any Actor)? = #isolation,
        _ produce: (PostgresCopyWriter) async throws -> Void
    ) async throws -> Int {
        let copy = try await self.call { connection throws(PostgresError) in try await connection.startCopy(sql) }
        let writer = PostgresCopyWriter(connection: self)
        do {
            try await produce(writer)
            writer.close()
            if let failure = writer.failure { throw failure }  // swallowed by `produce`
        } catch {
            writer.close()
            if writer.failure != nil {
                // The database failed under a write: the COPY cannot be ended.
                self.connection.abandonUnfinishedCopy(copy)
            } else {
                await self.abortCopy(copy)
            }
            throw error
        }
        let rest = writer.takeBuffer()
        do {
            return try await self.call { connection throws(PostgresError) in
                if !rest.isEmpty { try await connection.putCopyData(rest) }
                return try await connection.endCopy(copy)
            }
        } catch {
            self.connection.abandonUnfinishedCopy(copy)
            throw error
        }
    }

    /// Aborts a COPY whose producer failed: the server discards its rows and answers with an
    /// error, which is read and dropped (the producer's error is what the caller needs).
    private func abortCopy(_ copy: LibPQConnection.CopyIn) async {
        do {
            _ = try await self.call { connection throws(PostgresError) in
                try await connection.endCopy(copy, abortingWith: "the client failed to produce the data")
            }
        } catch {
            self.connection.abandonUnfinishedCopy(copy)
        }
    }
}

/// Where the data of a `PostgresConnection.copyFrom` goes, in the format its COPY statement
/// says (`PostgresCopyText` writes the text format's fields). Valid only inside the
/// `produce` closure it is given to, and for one task at a time.
///
/// Writes are gathered into pieces of some 64 KiB before they go to the connection: a caller
/// may write millions of short rows, one write each, and most writes only copy bytes.
public final class PostgresCopyWriter {
    /// How many bytes are gathered before they are sent.
    static let flushThreshold = 64 * 1024

    private let connection: PostgresConnection
    private var buffer: [UInt8] = []
    private var isClosed = false
    /// Why a write failed on the database's side: the COPY cannot go on.
    private(set) var failure: PostgresError?

    init(connection: PostgresConnection) {
        self.connection = connection
        self.buffer.reserveCapacity(Self.flushThreshold)
    }

    /// Writes `bytes` (UTF-8 in the text and CSV formats), sending what has gathered when
    /// it reaches some 64 KiB.
    ///
    /// - Throws: `PostgresError` when the connection fails (let it through: the COPY is over);
    ///   `invalidValue` after `produce` has returned.
    public func write(_ bytes: some Collection<UInt8>, isolation: isolated (any Actor)? = #isolation) async throws {
        try self.checkUsable()
        self.buffer.append(contentsOf: bytes)
        if self.buffer.count >= Self.flushThreshold { try await self.flush() }
    }

    /// Writes `text` as UTF-8.
    public func write(_ text: String, isolation: isolated (any Actor)? = #isolation) async throws {
        try await self.write(text.utf8)
    }

    private func checkUsable() throws(PostgresError) {
        if let failure { throw failure }
        guard !self.isClosed else {
            throw PostgresError(code: .invalidValue, message: "a COPY's writer was used after its producer returned")
        }
    }

    /// Sends what has gathered, as a call of its own.
    private func flush(isolation: isolated (any Actor)? = #isolation) async throws(PostgresError) {
        let chunk = self.buffer
        self.buffer.removeAll(keepingCapacity: true)
        do {
            try await self.connection.call { connection throws(PostgresError) in try await connection.putCopyData(chunk) }
        } catch {
            self.failure = error
            throw error
        }
    }

    /// Ends the writer's use by `produce`.
    func close() { self.isClosed = true }

    /// What is gathered and not yet sent, to go with the end of the COPY.
    func takeBuffer() -> [UInt8] {
        defer { self.buffer = [] }
        return self.buffer
    }
}

/// Used by the one task that runs `produce`: its buffer is not guarded.
@available(*, unavailable)
extension PostgresCopyWriter: Sendable {}
