internal import CLibPQ
import NIOConcurrencyHelpers
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One libpq `PGconn`, in non-blocking mode.
///
/// Its calls send without blocking and wait for the server by suspending in `SocketPoller`
/// (`LibPQConnection+Readiness.swift`), so no thread is held while a statement runs. Only
/// opening a connection blocks (`open`: libpq resolves the host name on the calling thread),
/// and runs on a thread pool.
/// `@unchecked Sendable` so that a task can hand it on; it is not thread-safe, and its
/// owners (`PostgresConnection`, `PostgresListener`) run one call on it at a time. The
/// exceptions are `requestCancel()` and the watchdog's face (`LibPQConnection+Watchdog.swift`),
/// which any thread may call while a call waits: they touch only `cancellation`, behind its
/// own lock, and `blockedSince`, an atomic.
///
/// What a session sets up for each transaction (its role, its statement timeout) is decided
/// by `policy`, and which names its prepared statements have by `preparedStatements`, both
/// plain values; this class sends what they decide (`LibPQConnection+Session.swift`).
final class LibPQConnection: @unchecked Sendable {
    let handle: OpaquePointer
    /// `host:port` of the server, for error messages.
    let server: String
    /// The role every transaction takes and the `statement_timeout` it runs under. It picks
    /// the SQL a transaction runs first; the connection prepares that and sends it.
    var policy = SessionPolicy()
    /// What cancels the statement running on this connection, from another thread (and what
    /// `abandon()` checks before it shuts the socket down).
    let cancellation: NIOLockedValueBox<Cancellation>
    /// When the call blocked on the server now began (`NIODeadline` uptime nanoseconds),
    /// 0 while none is: for the pool's watchdog, which reads it from another thread
    /// (`LibPQConnection+Watchdog.swift`).
    let blockedSince = Atomic<UInt64>(0)
    /// Named prepared statements this session already has, by SQL text and parameter types.
    var preparedStatements = PreparedStatements()
    /// In pipeline mode: each statement sent and not yet received, oldest first.
    var pipelineQueue: [PipelinedStatement] = []
    /// When the call running now must end (its lease's deadline); nil: no limit but the
    /// server's `statement_timeout` and the pool's watchdog.
    var callDeadline: NIODeadline?
    /// A call ended without its answer (its deadline passed, or the connection broke): a
    /// statement may still run on the connection, which must never be lent again.
    var isBroken = false
    /// In pipeline mode: why a statement failed to prepare, for the statements sent after it
    /// that counted on it (the server answers those "does not exist").
    var failedPreparations: [PreparedStatements.Key: PostgresError] = [:]

    /// libpq's cancel object (made when the connection opens, used from the cancel threads), and
    /// whether a cancel was asked for.
    struct Cancellation {
        var handle: OpaquePointer?
        var isRequested = false
        var isClosed = false
    }

    private init(handle: OpaquePointer, server: String) {
        self.handle = handle
        self.server = server
        self.cancellation = NIOLockedValueBox(Cancellation(handle: PQgetCancel(handle)))
    }

    /// Opens a connection, blocking the calling thread (never an event loop's): libpq
    /// resolves the host name and connects here. The session is not set up yet
    /// (`setUpSession`); the connection is left in non-blocking mode.
    static func open(_ configuration: PostgresConfiguration) throws(PostgresError) -> LibPQConnection {
        let parameters = configuration.connectionParameters
        let keywords = parameters.map { strdup($0.0) }
        let values = parameters.map { strdup($0.1) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        let keywordPointers = keywords.map { UnsafePointer($0) } + [nil]
        let valuePointers = values.map { UnsafePointer($0) } + [nil]
        guard let handle = PQconnectdbParams(keywordPointers, valuePointers, 1) else {
            throw PostgresError(code: .connectionFailed, message: "libpq could not allocate a connection")
        }
        let server = Self.serverName(of: handle)
        guard PQstatus(handle) == CONNECTION_OK, PQsetnonblocking(handle, 1) == 0 else {
            let reason = Self.errorText(of: handle)
            PQfinish(handle)
            throw PostgresError(
                code: .connectionFailed,
                message: "could not connect to PostgreSQL at \(server): \(reason)",
                host: server
            )
        }
        // Notices (e.g. "relation already exists, skipping") would go to stderr otherwise.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        return LibPQConnection(handle: handle, server: server)
    }

    private static func serverName(of handle: OpaquePointer) -> String {
        let host = PQhost(handle).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        let port = PQport(handle).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "5432"
        return "\(host):\(port)"
    }

    static func errorText(of handle: OpaquePointer) -> String {
        guard let text = PQerrorMessage(handle) else { return "unknown error" }
        return String(cString: text).trimmingWhitespace()
    }

    /// Closes the connection (without blocking). Afterwards the object must not be used;
    /// closing it again does nothing (libpq's handle is freed once).
    func close() {
        let closing = self.cancellation.withLockedValue { state -> (isFirst: Bool, cancel: OpaquePointer?) in
            defer {
                state.handle = nil
                state.isClosed = true
            }
            return (!state.isClosed, state.handle)
        }
        guard closing.isFirst else { return }
        if let cancel = closing.cancel { PQfreeCancel(cancel) }
        SocketPoller.shared.forget(PQsocket(self.handle))
        // In non-blocking mode, PQfinish does not wait to send its goodbye.
        PQfinish(self.handle)
    }

    /// Whether `requestCancel()` was called: a cancel request may reach the server after the
    /// statement it was meant for has ended, and cancel whatever runs next, so a connection
    /// that was asked to cancel is never lent again.
    var isCancelRequested: Bool { self.cancellation.withLockedValue { $0.isRequested } }

    /// Asks the server to cancel the statement running on this connection (`PQcancel`, which
    /// opens a connection of its own to send the request). Safe from any thread while another
    /// one is blocked in a call on this connection; it blocks for a network round trip, so
    /// never call it on an event loop. Only the first call does anything.
    func requestCancel() {
        let cancel = self.cancellation.withLockedValue { state -> OpaquePointer? in
            guard !state.isRequested else { return nil }
            state.isRequested = true
            defer { state.handle = nil }
            return state.handle
        }
        guard let cancel else { return }
        var message = [CChar](repeating: 0, count: 256)
        _ = PQcancel(cancel, &message, Int32(message.count))
        PQfreeCancel(cancel)
    }

    /// The server process id of this session (for `pg_terminate_backend`, `pg_stat_activity`).
    var backendPID: Int32 { PQbackendPID(self.handle) }

    /// Whether libpq still considers the connection open.
    var isOpen: Bool { PQstatus(self.handle) == CONNECTION_OK }

    /// Whether the session is outside any transaction block and out of pipeline mode (ready to lend).
    var isIdle: Bool { PQtransactionStatus(self.handle) == PQTRANS_IDLE && PQpipelineStatus(self.handle) == PQ_PIPELINE_OFF }

    /// A non-blocking check that an idle connection is still alive: a server that
    /// terminated the session has sent an error and closed the socket, which shows up as
    /// readable input.
    func checkAlive() -> Bool {
        // Input may come in pieces (the FATAL message, then end-of-file): read until there
        // is nothing more, or the connection turns out to be closed.
        for _ in 0..<8 {
            guard self.isOpen else { return false }
            var descriptor = pollfd(fd: PQsocket(self.handle), events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 0)
            if ready < 0 { return false }
            if ready == 0 { return true }
            guard PQconsumeInput(self.handle) == 1 else { return false }
            _ = PQisBusy(self.handle)  // parses what was read
            _ = self.takeNotifications()
        }
        return self.isOpen
    }

    // MARK: - Statements

    /// Runs one statement with parameters and returns its rows in binary format. The
    /// statement is parsed once per connection and reused.
    ///
    /// Outside a transaction, on a connection with a role (`policy.role`) or a call's
    /// statement timeout, the statement runs in a transaction of its own that sets them up
    /// first (`transactionSetup()`), in the same round trip (through pipeline mode: two
    /// statements before one sync point share an implicit transaction).
    func execute(_ sql: String, bindings: PostgresBindings) async throws(PostgresError) -> PostgresRows {
        if PQtransactionStatus(self.handle) == PQTRANS_IDLE, PQpipelineStatus(self.handle) == PQ_PIPELINE_OFF,
            let setup = try await self.transactionSetup()
        {
            try self.enterPipelineMode()
            let rows: Result<PostgresRows, PostgresError>
            do throws(PostgresError) {
                try self.send(sql, bindings: bindings, setup: setup)
                rows = .success(try await self.receive())
            } catch {
                rows = .failure(error)
            }
            await self.leavePipelineMode()
            return try rows.get()
        }
        let statementName = try await self.preparedStatementName(for: sql, types: bindings.types)
        let values = bindings.values.map { $0.map { strdup($0) } ?? nil }
        defer { values.forEach { free($0) } }
        let valuePointers = values.map { UnsafePointer($0) }
        guard PQsendQueryPrepared(self.handle, statementName, Int32(values.count), valuePointers, nil, nil, 1) == 1 else {
            throw self.connectionError()
        }
        return try self.consume(try await self.lastResult())
    }

    /// Runs one or more statements without parameters through the simple query protocol
    /// (migrations, `BEGIN`, `LISTEN`). Returns the command tag of the last statement.
    ///
    /// Outside a transaction, on a connection with a role (`policy.role`), the script
    /// starts with `SET LOCAL ROLE`: the statements of one script share a transaction (a
    /// `BEGIN` in it keeps it open), so the role lasts until that transaction ends. Such a
    /// script cannot hold a statement that refuses to run in a transaction (`CREATE DATABASE`).
    @discardableResult
    func executeScript(_ sql: String) async throws(PostgresError) -> String {
        var script = sql
        if let role = self.policy.role, PQtransactionStatus(self.handle) == PQTRANS_IDLE {
            // SET ROLE takes an identifier, not a value; libpq quotes it.
            script = "SET LOCAL ROLE \(try self.quotedIdentifier(role)); " + sql
        }
        guard PQsendQuery(self.handle, script) == 1 else { throw self.connectionError() }
        let result = try await self.lastResult()
        defer { PQclear(result) }
        try self.check(result)
        return PQcmdStatus(result).map { String(cString: $0) } ?? ""
    }

    /// Opens a transaction block with `statement` (`BEGIN …`) and runs `transactionSetup()`
    /// in it, in one round trip (pipeline mode: the setup's values are parameters).
    func begin(_ statement: String) async throws(PostgresError) {
        guard let setup = try await self.transactionSetup() else {
            try await self.executeScript(statement)
            return
        }
        try self.enterPipelineMode()
        let values = setup.values.map { strdup($0) }
        defer { values.forEach { free($0) } }
        let valuePointers = values.map { UnsafePointer($0) }
        guard PQsendQueryParams(self.handle, statement, 0, nil, nil, nil, nil, 1) == 1,
            PQsendQueryPrepared(self.handle, setup.statement, Int32(values.count), valuePointers, nil, nil, 1) == 1,
            PQpipelineSync(self.handle) == 1
        else {
            // Left in pipeline mode: the pool does not lend it again.
            throw self.connectionError()
        }
        var failure: PostgresError?
        // Each statement's result and the null that ends it, then the sync point.
        for _ in 0..<2 {
            guard let result = try await self.nextResult() else { throw self.connectionError() }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
                break
            case PGRES_PIPELINE_ABORTED:
                failure = failure ?? PostgresError(code: .server, message: "the transaction's setup was not run", host: self.server)
            default:
                failure = failure ?? self.serverError(from: result)
            }
            PQclear(result)
            if let extra = try await self.nextResult() {
                PQclear(extra)
                throw PostgresError(code: .connectionClosed, message: "libpq answered out of order in pipeline mode", host: self.server)
            }
        }
        guard let sync = try await self.nextResult() else { throw self.connectionError() }
        let status = PQresultStatus(sync)
        PQclear(sync)
        guard status == PGRES_PIPELINE_SYNC else {
            throw PostgresError(code: .connectionClosed, message: "libpq answered out of order in pipeline mode", host: self.server)
        }
        _ = PQexitPipelineMode(self.handle)
        if let failure { throw failure }
    }

    /// The name `sql` with parameters of `types` is prepared under on this session; prepares
    /// it the first time (a round trip, so outside pipeline mode). A failed prepare throws,
    /// and its name is not used again.
    func preparedStatementName(for sql: String, types: [UInt32]) async throws(PostgresError) -> String {
        let key = PreparedStatements.Key(sql: sql, types: types)
        if let name = self.preparedStatements.name(for: key) { return name }
        let name = self.preparedStatements.reserveName()
        let sent = types.withUnsafeBufferPointer { types in
            PQsendPrepare(self.handle, name, sql, Int32(types.count), types.baseAddress)
        }
        guard sent == 1 else { throw self.connectionError() }
        let result = try await self.lastResult()
        defer { PQclear(result) }
        try self.check(result)
        self.preparedStatements.record(name, for: key)
        return name
    }

    /// The rows of `result`, copied out of it; `result` is cleared. `columns`: the result's
    /// columns when the caller knows them already (the rows of one statement in single-row
    /// mode), so that each row does not read their names again.
    func consume(_ result: OpaquePointer?, columns knownColumns: [PostgresColumn]? = nil) throws(PostgresError) -> PostgresRows {
        defer { PQclear(result) }
        try self.check(result)
        guard let result else { throw self.connectionError() }
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        var columns: [PostgresColumn] = knownColumns ?? []
        if knownColumns?.count != columnCount {
            columns = []
            columns.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                let name = PQfname(result, Int32(column)).map { String(cString: $0) } ?? ""
                columns.append(PostgresColumn(name: name, type: PostgresDataType(oid: PQftype(result, Int32(column)))))
            }
        }
        var cells: [(offset: Int, length: Int)] = []
        cells.reserveCapacity(rowCount * columnCount)
        var size = 0
        for row in 0..<Int32(rowCount) {
            for column in 0..<Int32(columnCount) {
                let isNull = PQgetisnull(result, row, column) == 1
                let length = isNull ? -1 : Int(PQgetlength(result, row, column))
                cells.append((size, length))
                size += max(0, length)
            }
        }
        // Sized once: a large result (a page of a large group is over a megabyte) grown by
        // doubling would be copied and its fresh memory touched several times over.
        var storage: [UInt8] = []
        storage.reserveCapacity(size)
        for row in 0..<Int32(rowCount) {
            for column in 0..<Int32(columnCount) {
                let length = cells[Int(row) * columnCount + Int(column)].length
                if length > 0, let value = PQgetvalue(result, row, column) {
                    value.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
                        storage.append(contentsOf: UnsafeBufferPointer(start: bytes, count: length))
                    }
                }
            }
        }
        let affected = PQcmdTuples(result).flatMap { Int(String(cString: $0)) } ?? 0
        return PostgresRows(columns: columns, affectedRows: affected, storage: storage, cells: cells)
    }

    /// Throws the error a result carries, if any.
    private func check(_ result: OpaquePointer?) throws(PostgresError) {
        guard let result else { throw self.connectionError() }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            return
        default:
            throw self.serverError(from: result)
        }
    }

    func serverError(from result: OpaquePointer) -> PostgresError {
        func field(_ code: UInt8) -> String? {
            PQresultErrorField(result, Int32(code)).map { String(cString: $0) }
        }
        let message = field(UInt8(ascii: "M")) ?? PQresultErrorMessage(result).map { String(cString: $0) } ?? ""
        return PostgresError(
            code: self.isOpen ? .server : .connectionClosed,
            message: message.trimmingWhitespace().isEmpty ? Self.errorText(of: self.handle) : message,
            sqlState: field(UInt8(ascii: "C")),
            detail: field(UInt8(ascii: "D")),
            constraint: field(UInt8(ascii: "n")),
            host: self.server
        )
    }

    func connectionError() -> PostgresError {
        PostgresError(
            code: self.isOpen ? .server : .connectionClosed,
            message: "connection to \(self.server): \(Self.errorText(of: self.handle))",
            host: self.server
        )
    }

    // MARK: - Notifications

    /// The socket to wait on for notifications.
    var socket: Int32 { PQsocket(self.handle) }

    /// Reads whatever input is waiting on the socket; false when the connection is lost.
    func consumeInput() -> Bool {
        PQconsumeInput(self.handle) == 1 && self.isOpen
    }

    /// The notifications libpq has received so far, oldest first.
    func takeNotifications() -> [PostgresNotification] {
        var notifications: [PostgresNotification] = []
        while let notify = PQnotifies(self.handle) {
            defer { PQfreemem(notify) }
            notifications.append(
                PostgresNotification(
                    channel: String(cString: notify.pointee.relname),
                    payload: String(cString: notify.pointee.extra),
                    backendPID: notify.pointee.be_pid
                )
            )
        }
        return notifications
    }

    /// Quotes an identifier (a channel name for `LISTEN`) the way the server parses it.
    func quotedIdentifier(_ name: String) throws(PostgresError) -> String {
        guard let quoted = PQescapeIdentifier(self.handle, name, name.utf8.count) else {
            throw PostgresError(code: .invalidValue, message: Self.errorText(of: self.handle))
        }
        defer { PQfreemem(quoted) }
        return String(cString: quoted)
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        return String(scalars)
    }
}

extension LibPQConnection {
    /// What a wait for notifications ended with.
    enum WaitOutcome {
        case notifications([PostgresNotification])
        case connectionLost
        case cancelled
    }

    /// Suspends until the server sends something, or the task is cancelled.
    ///
    /// Waits on socket readiness (`SocketPoller`), so an idle listener uses no CPU and no
    /// thread; there is no timeout and no sleep loop.
    func waitForNotifications() async -> WaitOutcome {
        let pending = self.takeNotifications()
        if !pending.isEmpty { return .notifications(pending) }
        guard self.isOpen else { return .connectionLost }
        switch await SocketPoller.shared.wait(for: self.socket, .readable, until: nil, cancellable: true) {
        case .cancelled:
            return .cancelled
        case .ready, .deadlinePassed:
            guard self.consumeInput() else { return .connectionLost }
            return .notifications(self.takeNotifications())
        }
    }
}
