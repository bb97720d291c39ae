import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// One session with PostgreSQL, with an async API.
///
/// libpq runs in non-blocking mode: a call sends its statement from the calling task and
/// suspends until the server's answer can be read (`SocketPoller`), so no thread waits on
/// the network for it, and no event loop ever does. Only opening a connection blocks a
/// thread (host name resolution and the connect, in libpq), on a thread pool.
///
/// `@unchecked Sendable`: the libpq handle is not thread-safe, and it is used by one task
/// at a time — the pool lends a connection to a single lease, and each method awaits its
/// call before returning, so two calls of one connection never overlap as long as one
/// lease does not use the connection from two tasks at once (which callers must not).
public final class PostgresConnection: @unchecked Sendable {
    let connection: LibPQConnection
    let logger: Logger
    /// The deadline of the lease that holds the connection (its `PostgresDeadline`), nil
    /// outside a pool or a scope: every call on it must end by then (see `call`). Set and
    /// read by the one task that holds the lease.
    var deadline: NIODeadline?

    private init(connection: LibPQConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    /// A pool's connection, opened (and its session set up) by the pool.
    convenience init(pooled connection: LibPQConnection, logger: Logger) {
        self.init(connection: connection, logger: logger)
        logger.debug("postgres connection opened", metadata: ["postgres.backend_pid": "\(connection.backendPID)"])
    }

    /// Opens a connection.
    ///
    /// - Throws: `PostgresError` with code `connectionFailed` naming the server when it cannot
    ///   be reached or refuses the login.
    public static func connect(to configuration: PostgresConfiguration, logger: Logger) async throws -> PostgresConnection {
        let connection = try await LibPQConnection.open(configuration, on: .singleton)
        logger.debug("postgres connection opened", metadata: ["postgres.backend_pid": "\(connection.backendPID)"])
        return PostgresConnection(connection: connection, logger: logger)
    }

    /// Runs a statement (prepared once per connection, then reused) and returns its rows.
    ///
    /// Values are bound to `$1`, `$2`, … in order; never put values into `sql` itself.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresRows {
        let bindings = try PostgresBindings(parameters)
        return try await self.call { connection throws(PostgresError) in
            try await connection.execute(sql, bindings: bindings)
        }
    }

    /// Runs a statement and folds its rows into `initial` with `update`, one by one as they
    /// arrive (libpq's single-row mode): the first rows are worked on while the server is still
    /// sending the rest, where `query` would wait for them all first. For a large result whose
    /// rows take work of their own (a page of a large group's receipts).
    ///
    /// `update` runs on the calling task, between the rows' arrivals; it sees the rows in the
    /// order the server sends them. When it throws, the rest of the rows are read and
    /// dropped and its error is thrown.
    public func reduceRows<State: Sendable>(
        _ sql: String,
        _ parameters: [any PostgresEncodable] = [],
        into initial: State,
        _ update: @escaping @Sendable (inout State, PostgresRow) throws -> Void
    ) async throws -> State {
        let bindings = try PostgresBindings(parameters)
        let outcome = try await self.call { connection throws(PostgresError) -> Result<State, any Error> in
            var state = initial
            if let failure = try await connection.execute(sql, bindings: bindings, eachRow: { try update(&state, $0) }) {
                return .failure(failure)
            }
            return .success(state)
        }
        return try outcome.get()
    }

    /// Runs a statement and returns how many rows it inserted, updated or deleted.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> Int {
        try await self.query(sql, parameters).affectedRows
    }

    /// Runs a script of one or more statements that take no parameters (a migration file,
    /// `BEGIN`, `COMMIT`). Returns the command tag of the last statement, e.g. `COMMIT`.
    @discardableResult
    public func executeScript(_ sql: String) async throws -> String {
        try await self.call { connection throws(PostgresError) in
            try await connection.executeScript(sql)
        }
    }

    /// The server process id of this session.
    public var backendPID: Int32 { self.connection.backendPID }

    /// Whether the connection is open as far as libpq knows (without a round trip).
    public var isOpen: Bool { self.connection.isOpen }

    /// Closes the connection; it must not be used afterwards.
    public func close() async {
        self.connection.close()
        self.logger.debug("postgres connection closed")
    }

    /// Runs `body` with the connection. When the calling task is cancelled while it runs
    /// (the client of a request went away), the server is asked to cancel the statement, so
    /// that a statement waiting for a lock does not hold the connection until it ends; the
    /// connection is then not reused.
    ///
    /// With a `deadline` (a pooled connection) and `bounded`, the call ends by the deadline
    /// whatever the server does. Sessions' statements are bounded by the server itself
    /// (`statement_timeout`, set to the time left for each transaction and statement:
    /// `SessionPolicy.statementTimeout`), but a server that does not answer at all (frozen,
    /// or cut off by the network) cannot end them, and neither can a cancel request, which
    /// `PQcancel` sends over a connection of its own. So the wait for the server ends at the
    /// deadline with `deadlineExceeded`: a cancel request is sent (from the cancel threads,
    /// never this task's or an event loop's), and the connection is never lent again
    /// (`hasAbandonedCall`).
    func call<T: Sendable>(
        bounded: Bool = true,
        _ body: (LibPQConnection) async throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        // A call given up at its deadline may have left a statement running: nothing more.
        guard !self.hasAbandonedCall else {
            throw PostgresError(code: .deadlineExceeded, message: "an earlier call on this connection passed its deadline")
        }
        let connection = self.connection
        if bounded, let deadline = self.deadline {
            let left = deadline - NIODeadline.now()
            guard left > .zero else {
                throw PostgresError(code: .deadlineExceeded, message: "the database work's deadline has passed")
            }
            // Whole milliseconds, rounded up: the server's timer must not fire before ours.
            connection.policy.limitStatements(toMilliseconds: Int((left.nanoseconds + 999_999) / 1_000_000))
            connection.callDeadline = deadline
        }
        defer {
            connection.policy.limitStatements(toMilliseconds: nil)
            connection.callDeadline = nil
        }
        let outcome = await withTaskCancellationHandler {
            do throws(PostgresError) {
                return Result<T, PostgresError>.success(try await body(connection))
            } catch {
                return .failure(error)
            }
        } onCancel: {
            self.cancelRunningCall()
        }
        if case .failure(let error) = outcome, error.code == .deadlineExceeded, connection.isBroken {
            self.logger.debug("a database call passed its deadline; abandoning its connection", metadata: ["postgres.backend_pid": "\(self.backendPID)"])
            self.cancelRunningCall()
        }
        return try outcome.get()
    }

    /// How long the watchdog lets a call wait for the server after its cancel request
    /// before it shuts the connection's socket down under it (`LibPQConnection.abandon`):
    /// long enough for a cancel request to end a statement on a server that answers.
    static let abandonAfter = TimeAmount.seconds(1)

    /// Whether a call ended without its answer (past its deadline, or on a broken
    /// connection): a statement may still run on the connection, which is only closed.
    var hasAbandonedCall: Bool { self.connection.isBroken }

    /// Asks the server to cancel the statement running on this connection, from a thread of
    /// its own (PQcancel blocks for a round trip: never on the caller's thread, maybe an event
    /// loop). The connection is not lent again afterwards.
    func cancelRunningCall() {
        let connection = self.connection
        Self.cancelThreads.submit { _ in connection.requestCancel() }
    }

    /// Threads that send cancel requests (`PQcancel` connects to the server and waits for it,
    /// without a time limit: on a frozen server, until it thaws). Nothing waits for them: a
    /// call past its deadline has been answered already, and its connection is closed
    /// whether or not the cancel request got through.
    private static let cancelThreads: NIOThreadPool = {
        let threads = NIOThreadPool(numberOfThreads: 2)
        threads.start()
        return threads
    }()

    /// Whether the server was asked to cancel a statement of this connection (see `call`).
    var isCancelRequested: Bool { self.connection.isCancelRequested }
}
