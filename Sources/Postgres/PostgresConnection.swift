import Logging
import NIOPosix

/// One session with PostgreSQL, with an async API.
///
/// Every libpq call runs as a job on a `NIOThreadPool`, so the caller's task suspends
/// while the network round trip blocks a pool thread, never a SwiftNIO event loop.
///
/// `@unchecked Sendable`: the libpq handle is not thread-safe, and it is used by one task
/// at a time — the pool lends a connection to a single lease, and each method awaits its
/// thread-pool job before returning, so two jobs of one connection never overlap as long
/// as one lease does not use the connection from two tasks at once (which callers must not).
public final class PostgresConnection: @unchecked Sendable {
    let connection: LibPQConnection
    private let threadPool: NIOThreadPool
    /// Whether `threadPool` is this connection's own, to shut down with it.
    private let ownsThreadPool: Bool
    let logger: Logger

    private init(connection: LibPQConnection, threadPool: NIOThreadPool, ownsThreadPool: Bool, logger: Logger) {
        self.connection = connection
        self.threadPool = threadPool
        self.ownsThreadPool = ownsThreadPool
        self.logger = logger
    }

    /// Opens a connection.
    ///
    /// - Parameter threadPool: where the blocking libpq calls run. Without one, the
    ///   connection gets a thread of its own: sharing a few threads between connections that
    ///   wait on each other's locks (two migrators, say) could leave none to run the holder.
    ///   A pool passes a thread pool with one thread per connection.
    /// - Throws: `PostgresError` with code `connectionFailed` naming the server when it cannot
    ///   be reached or refuses the login.
    public static func connect(
        to configuration: PostgresConfiguration,
        threadPool: NIOThreadPool? = nil,
        logger: Logger
    ) async throws -> PostgresConnection {
        let pool = threadPool ?? NIOThreadPool(numberOfThreads: 1)
        if threadPool == nil { pool.start() }
        let connection: LibPQConnection
        do {
            connection = try await Self.run(on: pool) { () throws(PostgresError) in
                try LibPQConnection.connect(configuration)
            }
        } catch {
            if threadPool == nil { try? await pool.shutdownGracefully() }
            throw error
        }
        logger.debug("postgres connection opened", metadata: ["postgres.backend_pid": "\(connection.backendPID)"])
        return PostgresConnection(connection: connection, threadPool: pool, ownsThreadPool: threadPool == nil, logger: logger)
    }

    /// Runs a statement (prepared once per connection, then reused) and returns its rows.
    ///
    /// Values are bound to `$1`, `$2`, … in order; never put values into `sql` itself.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable] = []) async throws -> PostgresRows {
        let bindings = try PostgresBindings(parameters)
        return try await self.onThread { connection throws(PostgresError) in
            try connection.execute(sql, bindings: bindings)
        }
    }

    /// Runs a statement and returns how many rows it inserted, updated or deleted.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [any PostgresEncodable] = []) async throws -> Int {
        try await self.query(sql, parameters).affectedRows
    }

    /// Runs a script of one or more statements that take no parameters (a migration file,
    /// `BEGIN`, `COMMIT`). Returns the command tag of the last statement, e.g. `COMMIT`.
    @discardableResult
    public func executeScript(_ sql: String) async throws -> String {
        try await self.onThread { connection throws(PostgresError) in
            try connection.executeScript(sql)
        }
    }

    /// The server process id of this session.
    public var backendPID: Int32 { self.connection.backendPID }

    /// Whether the connection is open as far as libpq knows (without a round trip).
    public var isOpen: Bool { self.connection.isOpen }

    /// Closes the connection; it must not be used afterwards.
    public func close() async {
        let connection = self.connection
        _ = try? await Self.run(on: self.threadPool) { () throws(PostgresError) in connection.close() }
        if self.ownsThreadPool { try? await self.threadPool.shutdownGracefully() }
        self.logger.debug("postgres connection closed")
    }

    deinit {
        if self.ownsThreadPool { self.threadPool.shutdownGracefully { _ in } }
    }

    /// Runs `body` on the connection's thread. When the calling task is cancelled while it
    /// runs (the client of a request went away, a deadline passed), the server is asked to
    /// cancel the statement, so that a statement waiting for a lock does not hold the
    /// connection and its thread until it ends; the connection is then not reused.
    func onThread<T: Sendable>(
        _ body: @escaping @Sendable (LibPQConnection) throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        let connection = self.connection
        let threadPool = self.threadPool
        let outcome = await withTaskCancellationHandler {
            do throws(PostgresError) {
                return Result<T, PostgresError>.success(
                    try await Self.run(on: threadPool) { () throws(PostgresError) in try body(connection) })
            } catch {
                return .failure(error)
            }
        } onCancel: {
            self.cancelRunningCall()
        }
        return try outcome.get()
    }

    /// Asks the server to cancel the statement running on this connection, from a thread of
    /// its own (PQcancel blocks for a round trip: never on the caller's thread, maybe an event
    /// loop). The connection is not lent again afterwards.
    func cancelRunningCall() {
        let connection = self.connection
        Self.cancelThreads.submit { _ in connection.requestCancel() }
    }

    /// Threads that send cancel requests (`PQcancel` connects to the server and waits for it).
    private static let cancelThreads: NIOThreadPool = {
        let threads = NIOThreadPool(numberOfThreads: 2)
        threads.start()
        return threads
    }()

    /// Whether the server was asked to cancel a statement of this connection (see `onThread`).
    var isCancelRequested: Bool { self.connection.isCancelRequested }

    private static func run<T: Sendable>(
        on threadPool: NIOThreadPool,
        _ body: @escaping @Sendable () throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        do {
            return try await threadPool.runIfActive { try body() }
        } catch let error as PostgresError {
            throw error
        } catch {
            throw PostgresError(code: .connectionClosed, message: "the connection's thread pool has shut down")
        }
    }
}
