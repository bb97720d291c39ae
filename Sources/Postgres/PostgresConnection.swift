import Logging
import NIOConcurrencyHelpers
import NIOCore
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
    /// The deadline of the lease that holds the connection (its `PostgresDeadline`), nil
    /// outside a pool or a scope: every call on it must end by then (see `onThread`). Set and
    /// read by the one task that holds the lease.
    var deadline: NIODeadline?
    /// A call given up at its deadline that still runs on the connection's thread: the
    /// connection is closed only once it has returned (`closeAfterAbandonedCall`).
    private let abandonedCall = NIOLockedValueBox<EventLoopFuture<Void>?>(nil)

    private init(connection: LibPQConnection, threadPool: NIOThreadPool, ownsThreadPool: Bool, logger: Logger) {
        self.connection = connection
        self.threadPool = threadPool
        self.ownsThreadPool = ownsThreadPool
        self.logger = logger
    }

    /// A pool's connection, opened by the pool on its thread pool.
    convenience init(pooled connection: LibPQConnection, threadPool: NIOThreadPool, logger: Logger) {
        self.init(connection: connection, threadPool: threadPool, ownsThreadPool: false, logger: logger)
        logger.debug("postgres connection opened", metadata: ["postgres.backend_pid": "\(connection.backendPID)"])
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
    public func query(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresRows {
        let bindings = try PostgresBindings(parameters)
        return try await self.onThread { connection throws(PostgresError) in
            try connection.execute(sql, bindings: bindings)
        }
    }

    /// Runs a statement and folds its rows into `initial` with `update`, one by one as they
    /// arrive (libpq's single-row mode): the first rows are worked on while the server is still
    /// sending the rest, where `query` would wait for them all first. For a large result whose
    /// rows take work of their own (a page of a large group's receipts).
    ///
    /// `update` runs on the connection's thread, which it holds while it works; it sees the rows
    /// in the order the server sends them. When it throws, the rest of the rows are read and
    /// dropped and its error is thrown.
    public func reduceRows<State: Sendable>(
        _ sql: String,
        _ parameters: [any PostgresEncodable] = [],
        into initial: State,
        _ update: @escaping @Sendable (inout State, PostgresRow) throws -> Void
    ) async throws -> State {
        let bindings = try PostgresBindings(parameters)
        let outcome = try await self.onThread { connection throws(PostgresError) -> Result<State, any Error> in
            var state = initial
            if let failure = try connection.execute(sql, bindings: bindings, eachRow: { try update(&state, $0) }) {
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
        if self.hasAbandonedCall {
            try? await self.closeAfterAbandonedCall().get()
            return
        }
        let connection = self.connection
        _ = try? await Self.run(on: self.threadPool) { () throws(PostgresError) in connection.close() }
        if self.ownsThreadPool { try? await self.threadPool.shutdownGracefully() }
        self.logger.debug("postgres connection closed")
    }

    deinit {
        if self.ownsThreadPool { self.threadPool.shutdownGracefully { _ in } }
    }

    /// Runs `body` on the connection's thread. When the calling task is cancelled while it
    /// runs (the client of a request went away), the server is asked to cancel the
    /// statement, so that a statement waiting for a lock does not hold the connection and
    /// its thread until it ends; the connection is then not reused.
    ///
    /// With a `deadline` (a pooled connection) and `bounded`, the call ends by the deadline
    /// whatever the server does (see `onThreadByDeadline`).
    func onThread<T: Sendable>(
        bounded: Bool = true,
        _ body: @escaping @Sendable (LibPQConnection) throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        // A call given up at its deadline may still run on the thread: nothing else may.
        guard !self.hasAbandonedCall else {
            throw PostgresError(code: .deadlineExceeded, message: "an earlier call on this connection passed its deadline")
        }
        if bounded, let deadline = self.deadline {
            return try await self.onThreadByDeadline(deadline, body)
        }
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

    /// How long a call given up at its deadline may still wait for the server before its
    /// connection's socket is shut down under it (`LibPQConnection.abandon`), which frees the
    /// thread: long enough for a cancel request to end a statement on a server that answers.
    static let abandonAfter = TimeAmount.seconds(1)

    /// `onThread` for a call that must end by `deadline`.
    ///
    /// Sessions' statements are bounded by the server itself (`statement_timeout`, set to
    /// the time left for each transaction and statement: `SessionPolicy.statementTimeout`),
    /// but a server that does not answer at all (frozen, or cut off by the network) cannot
    /// end them, and neither can a cancel request, which `PQcancel` sends over a connection of
    /// its own. So the caller does not wait for the thread past the deadline: it gets
    /// `deadlineExceeded` at once, and the call is left to run out: a cancel request is
    /// sent (from the cancel threads, never this task's or an event loop's), the socket is
    /// shut down `abandonAfter` later if the call still waits, and the connection is never
    /// lent again; the pool closes it when the call has returned.
    private func onThreadByDeadline<T: Sendable>(
        _ deadline: NIODeadline,
        _ body: @escaping @Sendable (LibPQConnection) throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        let left = deadline - NIODeadline.now()
        guard left > .zero else {
            throw PostgresError(code: .deadlineExceeded, message: "the database work's deadline has passed")
        }
        // Whole milliseconds, rounded up: the server's timer must not fire before ours.
        let milliseconds = Int((left.nanoseconds + 999_999) / 1_000_000)
        let connection = self.connection
        let eventLoop = MultiThreadedEventLoopGroup.singleton.any()
        let call = self.threadPool.runIfActive(eventLoop: eventLoop) { () throws -> T in
            connection.policy.limitStatements(toMilliseconds: milliseconds)
            defer { connection.policy.limitStatements(toMilliseconds: nil) }
            return try body(connection)
        }
        let outcome = await withTaskCancellationHandler {
            await Self.result(of: call, by: deadline, on: eventLoop) {
                self.abandon(call.map { _ in }, on: eventLoop)
            }
        } onCancel: {
            self.cancelRunningCall()
        }
        switch outcome {
        case .success(let value):
            return value
        case .failure(let error as PostgresError):
            throw error
        case .failure(let error) where error is DeadlinePassed:
            throw PostgresError(
                code: .deadlineExceeded, message: "the database did not answer by the deadline", host: self.connection.server)
        case .failure:
            throw PostgresError(code: .connectionClosed, message: "the connection's thread pool has shut down")
        }
    }

    /// Thrown by `result(of:by:on:whenLate:)` when the deadline came first.
    struct DeadlinePassed: Error {}

    /// The outcome of `future`, or `DeadlinePassed` if `deadline` comes first (then
    /// `whenLate` runs, on the event loop, and the future is left to complete on its own).
    static func result<T: Sendable>(
        of future: EventLoopFuture<T>,
        by deadline: NIODeadline,
        on eventLoop: any EventLoop,
        whenLate: @escaping @Sendable () -> Void
    ) async -> Result<T, any Error> {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>, Never>) in
            let waiting = NIOLockedValueBox<CheckedContinuation<Result<T, any Error>, Never>?>(continuation)
            let timer = eventLoop.scheduleTask(deadline: deadline) {
                guard let continuation = waiting.withLockedValue({ $0.take() }) else { return }
                whenLate()
                continuation.resume(returning: .failure(DeadlinePassed()))
            }
            future.whenComplete { result in
                timer.cancel()
                waiting.withLockedValue { $0.take() }?.resume(returning: result)
            }
        }
    }

    /// Gives up a call that passed its deadline: asks the server to cancel it, and shuts the
    /// socket down under it if it still waits `abandonAfter` later.
    private func abandon(_ call: EventLoopFuture<Void>, on eventLoop: any EventLoop) {
        self.abandonedCall.withLockedValue { $0 = call }
        self.logger.debug("a database call passed its deadline; abandoning its connection", metadata: ["postgres.backend_pid": "\(self.backendPID)"])
        self.cancelRunningCall()
        let connection = self.connection
        let shutdown = eventLoop.scheduleTask(in: Self.abandonAfter) { connection.abandon() }
        call.whenComplete { _ in shutdown.cancel() }
    }

    /// Whether a call given up at its deadline may still run on the connection's thread: it
    /// must then be closed with `closeAfterAbandonedCall()`, and nothing else may touch it.
    var hasAbandonedCall: Bool { self.abandonedCall.withLockedValue { $0 != nil } }

    /// Closes the connection once its abandoned call has returned, without waiting for it;
    /// the future completes when it is closed.
    func closeAfterAbandonedCall() -> EventLoopFuture<Void> {
        let call = self.abandonedCall.withLockedValue { $0 }!
        let connection = self.connection
        let threadPool = self.threadPool
        let logger = self.logger
        return call.flatMapErrorWithEventLoop { _, eventLoop in eventLoop.makeSucceededVoidFuture() }
            .flatMap { threadPool.runIfActive(eventLoop: call.eventLoop) { connection.close() } }
            .always { _ in logger.debug("postgres connection closed after an abandoned call") }
    }

    /// Asks the server to cancel the statement running on this connection, from a thread of
    /// its own (PQcancel blocks for a round trip: never on the caller's thread, maybe an event
    /// loop). The connection is not lent again afterwards.
    func cancelRunningCall() {
        let connection = self.connection
        Self.cancelThreads.submit { _ in connection.requestCancel() }
    }

    /// Threads that send cancel requests (`PQcancel` connects to the server and waits for it,
    /// without a time limit: on a frozen server, until it thaws). Nothing waits for them: a
    /// call past its deadline has been answered already, and its connection is shut down
    /// (`abandon`) whether or not the cancel request got through.
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
