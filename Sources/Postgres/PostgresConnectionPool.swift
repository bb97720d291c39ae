import DequeModule
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle

/// A bounded pool of `PostgresConnection`s.
///
/// - A lease taken within a `PostgresDeadline` scope (an HTTP request, whose leases all share
///   it) ends by that deadline: the wait for a connection, the opening of one, and every call
///   on it. A wait fails with `poolTimeout`, a call with `deadlineExceeded` (see
///   `PostgresConnection.onThread`; each transaction's `statement_timeout` is the time left,
///   so a server that answers ends its statements itself, and one that does not cannot hold
///   the caller past the deadline). Only a pipeline (`withPipeline`) is exempt: its
///   statements are bounded one by one. Outside a scope (background work that may
///   legitimately hold a session for long) a lease waits at most `leaseTimeout`, and its
///   statements are bounded by the session's `statement_timeout` and the watchdog below.
/// - Opens connections on demand up to `maximumConnections`; a lease beyond that waits, in
///   arrival order, and fails with `poolTimeout` after `leaseTimeout` (or at its deadline).
///   At most `maximumWaiters` leases wait; one more fails at once with `poolExhausted`, so a
///   database that has become slow cannot gather an unbounded queue of requests.
/// - A connection whose statement was cancelled (its task was cancelled) is closed, not
///   reused: the cancel request could otherwise reach the server late and cancel the next
///   borrower's statement.
/// - A call given up at its deadline keeps its connection (and thread) until it returns,
///   which `PostgresConnection` makes happen within a second; the connection is then closed,
///   and only then is its slot free: the pool never has more than `maximumConnections` open.
/// - A connection the server dropped (found at lease or after a failed statement) is closed
///   and replaced by a new one on the next lease.
/// - As a `Service`, it closes every connection on graceful shutdown; leases then fail with
///   `poolClosed`.
///
/// - With `unresponsiveCallTimeout`, a watchdog looks every half second for calls that have
///   waited on the server longer than that: it cancels them (a cancel request), and shuts
///   the connection down under one that still waits a second later (as a call given up at
///   its deadline: `PostgresConnection.abandonAfter`). The backstop for the calls no
///   deadline bounds (a pipeline's) on a server that cannot end a statement itself (frozen,
///   stalled on its storage), where the sessions' `statement_timeout` cannot fire and a
///   cancel request is not acted upon.
///
/// Each connection's blocking libpq calls run on a thread pool with one thread per
/// connection, so a busy pool never starves other blocking work.
public final class PostgresConnectionPool: Service, Sendable {
    /// Pool limits.
    public struct Options: Sendable {
        /// The most connections open at once.
        public var maximumConnections: Int
        /// How long a lease waits for a free connection before failing (less when its
        /// `PostgresDeadline` comes sooner).
        public var leaseTimeout: TimeAmount
        /// The most leases waiting at once; one more fails at once.
        public var maximumWaiters: Int
        /// How long a call may wait on the server before the watchdog cancels it, then
        /// abandons its connection; nil: no watchdog. Longer than the sessions'
        /// `statement_timeout`, which ends a slow statement first when the server can.
        public var unresponsiveCallTimeout: TimeAmount?

        public init(
            maximumConnections: Int = 10, leaseTimeout: TimeAmount = .seconds(5), maximumWaiters: Int = 1000,
            unresponsiveCallTimeout: TimeAmount? = nil
        ) {
            precondition(maximumConnections > 0, "a pool needs at least one connection")
            precondition(maximumWaiters >= 0, "the bound of waiting leases cannot be negative")
            self.maximumConnections = maximumConnections
            self.leaseTimeout = leaseTimeout
            self.maximumWaiters = maximumWaiters
            self.unresponsiveCallTimeout = unresponsiveCallTimeout
        }
    }

    /// What a waiting lease is handed.
    private enum Grant {
        /// An open, idle connection.
        case connection(PostgresConnection)
        /// Permission to open a new connection (a slot was freed).
        case openSlot
    }

    private struct Waiter {
        let continuation: CheckedContinuation<Grant, any Error>
        let timeout: Scheduled<Void>
    }

    private struct State {
        var idle: [PostgresConnection] = []
        /// Connections open or being opened, idle or leased.
        var openCount = 0
        var waiters: [Int: Waiter] = [:]
        var waiterOrder: Deque<Int> = []
        var nextWaiterID = 0
        var isClosed = false
        /// Every open connection, idle or lent, for the watchdog.
        var open: [ObjectIdentifier: PostgresConnection] = [:]

        mutating func popWaiter() -> Waiter? {
            while let id = self.waiterOrder.popFirst() {
                if let waiter = self.waiters.removeValue(forKey: id) { return waiter }
            }
            return nil
        }
    }

    public let configuration: PostgresConfiguration
    public let options: Options
    private let logger: Logger
    private let threadPool: NIOThreadPool
    private let eventLoopGroup: any EventLoopGroup
    private let state = NIOLockedValueBox(State())
    private let watchdog = NIOLockedValueBox<RepeatedTask?>(nil)

    public init(
        configuration: PostgresConfiguration,
        options: Options = Options(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) {
        self.configuration = configuration
        self.options = options
        self.logger = logger
        self.eventLoopGroup = eventLoopGroup
        self.threadPool = NIOThreadPool(numberOfThreads: options.maximumConnections)
        self.threadPool.start()
        if let limit = options.unresponsiveCallTimeout {
            let task = eventLoopGroup.any().scheduleRepeatedTask(initialDelay: .milliseconds(500), delay: .milliseconds(500)) {
                [weak self] _ in self?.endUnresponsiveCalls(after: limit)
            }
            self.watchdog.withLockedValue { $0 = task }
        }
    }

    /// The watchdog's round: cancels each call waiting on the server longer than `limit`, and
    /// abandons the connection under one still waiting `PostgresConnection.abandonAfter` after that.
    private func endUnresponsiveCalls(after limit: TimeAmount) {
        let connections = self.state.withLockedValue { Array($0.open.values) }
        let limit = Duration.nanoseconds(limit.nanoseconds)
        for connection in connections {
            guard let blocked = connection.connection.blockedFor, blocked > limit else { continue }
            let metadata: Logger.Metadata = ["postgres.backend_pid": "\(connection.backendPID)", "postgres.waited": "\(blocked)"]
            if blocked > limit + .nanoseconds(PostgresConnection.abandonAfter.nanoseconds) {
                self.logger.warning("the database does not answer a call, even to cancel it; dropping its connection", metadata: metadata)
                connection.connection.abandon()
            } else if !connection.isCancelRequested {
                self.logger.warning("the database has not answered a call in time; cancelling it", metadata: metadata)
                connection.cancelRunningCall()
            }
        }
    }

    /// How many connections are open and how many of them are lent out.
    public var usage: (open: Int, leased: Int, waiting: Int) {
        self.state.withLockedValue { ($0.openCount, $0.openCount - $0.idle.count, $0.waiters.count) }
    }

    /// Lends a connection to `body` and takes it back afterwards.
    ///
    /// A connection left inside a transaction, or found broken, is closed rather than reused.
    /// Within a `PostgresDeadline` scope, the wait for the connection and every call on it
    /// end by that deadline.
    /// - Parameter leaseTimeout: how long to wait for a free connection, when not the pool's
    ///   `leaseTimeout`.
    @discardableResult
    public func withConnection<Result>(
        leaseTimeout: TimeAmount? = nil,
        caller: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let deadline = PostgresDeadline.current
        var waitUntil = NIODeadline.now() + (leaseTimeout ?? self.options.leaseTimeout)
        if let deadline, deadline < waitUntil { waitUntil = deadline }
        let connection = try await self.lease(by: waitUntil)
        connection.deadline = deadline
        let result: Result
        do {
            result = try await body(connection)
        } catch {
            await self.release(connection)
            throw error
        }
        await self.release(connection)
        return result
    }

    /// Runs `body` in a transaction on a pooled connection (see
    /// `PostgresConnection.withTransaction`).
    @discardableResult
    public func withTransaction<Result>(
        isolation level: PostgresConnection.IsolationLevel = .readCommitted,
        caller: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await self.withConnection { connection in
            try await connection.withTransaction(isolation: level) { connection in
                try await body(connection)
            }
        }
    }

    /// Runs one statement on a pooled connection.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresRows {
        try await self.withConnection { try await $0.query(sql, parameters) }
    }

    /// Runs one statement on a pooled connection and returns the number of rows it changed.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> Int {
        try await self.withConnection { try await $0.execute(sql, parameters) }
    }

    // MARK: - Lease and release

    private enum LeaseAction {
        case use(PostgresConnection)
        case open
        case wait
    }

    private func lease(by deadline: NIODeadline) async throws -> PostgresConnection {
        while true {
            let action = try self.state.withLockedValue { state throws(PostgresError) -> LeaseAction in
                if state.isClosed { throw PostgresError(code: .poolClosed, message: "the connection pool is closed") }
                if let connection = state.idle.popLast() { return .use(connection) }
                if state.openCount < self.options.maximumConnections {
                    state.openCount += 1
                    return .open
                }
                return .wait
            }
            switch action {
            case .use(let connection):
                if connection.connection.checkAlive() { return connection }
                self.logger.debug("replacing a dropped postgres connection")
                await self.discard(connection, replacing: true)
                return try await self.openConnection(by: deadline)
            case .open:
                return try await self.openConnection(by: deadline)
            case .wait:
                switch try await self.waitForGrant(until: deadline) {
                case .connection(let connection):
                    if connection.connection.checkAlive() { return connection }
                    await self.discard(connection, replacing: true)
                    return try await self.openConnection(by: deadline)
                case .openSlot:
                    return try await self.openConnection(by: deadline)
                }
            }
        }
    }

    /// Opens a connection in a slot already counted in `openCount`; frees the slot on failure.
    ///
    /// A connection that is not open by `deadline` (a server that accepts and never answers
    /// holds libpq up to its `connect_timeout`) fails the lease then; the attempt runs out on
    /// its thread, and what it opened is closed, its slot freed.
    private func openConnection(by deadline: NIODeadline) async throws -> PostgresConnection {
        let configuration = self.configuration
        let eventLoop = self.eventLoopGroup.any()
        let opening = self.threadPool.runIfActive(eventLoop: eventLoop) { () throws -> LibPQConnection in
            try LibPQConnection.connect(configuration)
        }
        let outcome = await PostgresConnection.result(of: opening, by: deadline, on: eventLoop) {
            opening.whenComplete { result in
                guard case .success(let late) = result else { return self.freeSlot() }
                self.threadPool.runIfActive(eventLoop: eventLoop) { late.close() }.whenComplete { _ in self.freeSlot() }
            }
        }
        switch outcome {
        case .success(let opened):
            let connection = PostgresConnection(pooled: opened, threadPool: self.threadPool, logger: self.logger)
            self.state.withLockedValue { $0.open[ObjectIdentifier(connection)] = connection }
            return connection
        case .failure(is PostgresConnection.DeadlinePassed):
            throw PostgresError(code: .poolTimeout, message: "no database connection could be opened by the deadline")
        case .failure(let error as PostgresError):
            self.freeSlot()
            throw error
        case .failure:
            self.freeSlot()
            throw PostgresError(code: .poolClosed, message: "the connection pool's threads have shut down")
        }
    }

    private func waitForGrant(until deadline: NIODeadline) async throws -> Grant {
        let id = self.state.withLockedValue { state in
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Grant, any Error>) in
                let timeout = self.eventLoopGroup.any().scheduleTask(deadline: deadline) {
                    self.failWaiter(
                        id,
                        with: PostgresError(code: .poolTimeout, message: "no database connection became free by the deadline")
                    )
                }
                // A connection may have been released between the first look and now.
                let grant = self.state.withLockedValue { state -> Result<Grant, any Error>? in
                    if state.isClosed { return .failure(PostgresError(code: .poolClosed, message: "the connection pool is closed")) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if let connection = state.idle.popLast() { return .success(.connection(connection)) }
                    if state.openCount < self.options.maximumConnections {
                        state.openCount += 1
                        return .success(.openSlot)
                    }
                    if state.waiters.count >= self.options.maximumWaiters {
                        return .failure(
                            PostgresError(
                                code: .poolExhausted,
                                message: "\(state.waiters.count) leases wait for a database connection already"
                            ))
                    }
                    state.waiters[id] = Waiter(continuation: continuation, timeout: timeout)
                    state.waiterOrder.append(id)
                    return nil
                }
                if let grant {
                    timeout.cancel()
                    continuation.resume(with: grant)
                }
            }
        } onCancel: {
            self.failWaiter(id, with: CancellationError())
        }
    }

    private func failWaiter(_ id: Int, with error: any Error) {
        let waiter = self.state.withLockedValue { $0.waiters.removeValue(forKey: id) }
        guard let waiter else { return }
        waiter.timeout.cancel()
        waiter.continuation.resume(throwing: error)
    }

    private func release(_ connection: PostgresConnection) async {
        connection.deadline = nil
        // Nothing else may touch a connection whose abandoned call still runs, and the lease
        // must not wait for that call: it is closed, and its slot freed, when the call returns.
        if connection.hasAbandonedCall {
            self.forget(connection)
            connection.closeAfterAbandonedCall().whenComplete { _ in self.freeSlot() }
            return
        }
        guard connection.isOpen, connection.connection.isIdle, !connection.isCancelRequested else {
            await self.discard(connection, replacing: false)
            return
        }
        enum ReleaseAction {
            case handOver(Waiter)
            case close
            case keep
        }
        let action = self.state.withLockedValue { state -> ReleaseAction in
            if state.isClosed {
                state.openCount -= 1
                return .close
            }
            if let waiter = state.popWaiter() { return .handOver(waiter) }
            state.idle.append(connection)
            return .keep
        }
        switch action {
        case .handOver(let waiter):
            waiter.timeout.cancel()
            waiter.continuation.resume(returning: .connection(connection))
        case .close:
            self.forget(connection)
            await connection.close()
        case .keep:
            break
        }
    }

    /// Closes a connection that must not be reused. With `replacing`, the caller keeps its
    /// slot to open a new one; otherwise the slot goes to a waiter or is freed.
    private func discard(_ connection: PostgresConnection, replacing: Bool) async {
        self.forget(connection)
        await connection.close()
        if !replacing { self.freeSlot() }
    }

    private func forget(_ connection: PostgresConnection) {
        self.state.withLockedValue { _ = $0.open.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    /// Gives a slot to the longest waiter, who will open a connection, or frees it.
    private func freeSlot() {
        let waiter = self.state.withLockedValue { state -> Waiter? in
            if !state.isClosed, let waiter = state.popWaiter() { return waiter }
            state.openCount -= 1
            return nil
        }
        if let waiter {
            waiter.timeout.cancel()
            waiter.continuation.resume(returning: .openSlot)
        }
    }

    // MARK: - Service

    /// Keeps the pool open until graceful shutdown or cancellation, then closes it.
    public func run() async throws {
        try? await gracefulShutdown()
        await self.close()
    }

    /// Closes idle connections, fails waiting leases, and closes leased connections as
    /// they come back.
    public func close() async {
        let (idle, waiters) = self.state.withLockedValue { state in
            state.isClosed = true
            let idle = state.idle
            state.idle = []
            state.openCount -= idle.count
            var waiters: [Waiter] = []
            while let waiter = state.popWaiter() { waiters.append(waiter) }
            return (idle, waiters)
        }
        for waiter in waiters {
            waiter.timeout.cancel()
            waiter.continuation.resume(throwing: PostgresError(code: .poolClosed, message: "the connection pool is closed"))
        }
        self.watchdog.withLockedValue { $0?.cancel() }
        for connection in idle {
            self.forget(connection)
            await connection.close()
        }
        self.logger.debug("postgres connection pool closed")
    }

    deinit {
        self.watchdog.withLockedValue { $0?.cancel() }
        self.threadPool.shutdownGracefully { _ in }
    }
}
