import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// A bounded pool of `PostgresConnection`s.
///
/// - A lease taken within a `PostgresDeadline` scope (an HTTP request, whose leases all share
///   it) ends by that deadline: the wait for a connection, the opening of one, and every call
///   on it. A wait fails with `poolTimeout`, a call with `deadlineExceeded` (see
///   `PostgresConnection.call`; each transaction's `statement_timeout` is the time left,
///   so a server that answers ends its statements itself, and one that does not cannot hold
///   the caller past the deadline). Only a pipeline (`withPipeline`) is exempt: its
///   statements are bounded one by one. Outside a scope (background work that may
///   legitimately hold a session for long) a lease waits at most `leaseTimeout`, and its
///   statements are bounded by the session's `statement_timeout` and the watchdog below.
/// - Opens connections on demand up to `maximumConnections`; a lease beyond that waits, in
///   its flow's line, and fails with `poolTimeout` after `leaseTimeout` (or at its deadline).
///   At most `maximumWaiters` leases wait; one more fails at once with `poolExhausted`, so a
///   database that has become slow cannot gather an unbounded queue of requests.
/// - A connection whose statement was cancelled (its task was cancelled) is closed, not
///   reused: the cancel request could otherwise reach the server late and cancel the next
///   borrower's statement.
/// - A connection whose call was given up at its deadline (a statement may still run on it)
///   is closed, and only then is its slot free: the pool never has more than
///   `maximumConnections` open.
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
/// - Leases wait in one line per `PostgresFlow` (a tenant of the service), and a connection
///   that comes free goes to the waiting flow that has held the pool's connections least, by
///   time; while several flows are active, each holds at most its share of
///   `Options.fairConcurrency`, and a flow alone all but one connection (`PoolStateMachine`),
///   so one flow's flood never makes another's short work wait behind all of it.
///
/// Connections run without threads of their own (`PostgresConnection`); only opening one
/// blocks, on a thread pool with a thread per connection, so a server slow to accept never
/// holds up the opening of another connection, nor any other blocking work.
///
/// Every decision (who gets which connection or a slot to open one, who waits, who fails,
/// what becomes of a connection that comes back, what the watchdog does) is
/// `PoolStateMachine`'s; the pool holds it under a lock and carries out what it returns.
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
        /// Connections that the active flows share equally while several are active (each
        /// holds at most its share, at least one); nil: `maximumConnections`.
        public var fairConcurrency: Int?

        public init(
            maximumConnections: Int = 10, leaseTimeout: TimeAmount = .seconds(5), maximumWaiters: Int = 1000,
            unresponsiveCallTimeout: TimeAmount? = nil, fairConcurrency: Int? = nil
        ) {
            precondition(maximumConnections > 0, "a pool needs at least one connection")
            precondition(maximumWaiters >= 0, "the bound of waiting leases cannot be negative")
            self.maximumConnections = maximumConnections
            self.leaseTimeout = leaseTimeout
            self.maximumWaiters = maximumWaiters
            self.unresponsiveCallTimeout = unresponsiveCallTimeout
            self.fairConcurrency = fairConcurrency
        }
    }

    /// A pooled connection, compared by identity.
    fileprivate struct Pooled: Hashable, Sendable {
        let connection: PostgresConnection
        static func == (lhs: Self, rhs: Self) -> Bool { lhs.connection === rhs.connection }
        func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self.connection)) }
    }

    /// A waiting lease: how to answer it, and its deadline's timer.
    fileprivate struct Waiter {
        let continuation: CheckedContinuation<Machine.Grant, any Error>
        let timeout: Scheduled<Void>

        func resume(with result: sending Result<Machine.Grant, any Error>) {
            self.timeout.cancel()
            self.continuation.resume(with: result)
        }
    }

    fileprivate typealias Machine = PoolStateMachine<Pooled, Waiter>

    public let configuration: PostgresConfiguration
    public let options: Options
    private let logger: Logger
    private let threadPool: NIOThreadPool
    private let eventLoopGroup: any EventLoopGroup
    private let state: NIOLockedValueBox<Machine>
    private let nextWaiterID = Atomic<Int>(0)
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
        self.state = NIOLockedValueBox(
            Machine(maximumConnections: options.maximumConnections, maximumWaiters: options.maximumWaiters, fairConcurrency: options.fairConcurrency))
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
        let connections = self.state.withLockedValue { $0.open }
        for pooled in connections {
            let connection = pooled.connection
            let blocked = connection.connection.blockedFor
            let action = Machine.watchdog(
                blocked: blocked, limit: .nanoseconds(limit.nanoseconds),
                abandonAfter: .nanoseconds(PostgresConnection.abandonAfter.nanoseconds), isCancelRequested: connection.isCancelRequested)
            let metadata: Logger.Metadata = ["postgres.backend_pid": "\(connection.backendPID)", "postgres.waited": "\(blocked ?? .zero)"]
            switch action {
            case .abandon?:
                self.logger.warning("the database does not answer a call, even to cancel it; dropping its connection", metadata: metadata)
                connection.connection.abandon()
            case .cancel?:
                self.logger.warning("the database has not answered a call in time; cancelling it", metadata: metadata)
                connection.cancelRunningCall()
            case nil:
                continue
            }
        }
    }

    /// How many connections are open and how many of them are lent out.
    public var usage: (open: Int, leased: Int, waiting: Int) {
        self.state.withLockedValue { $0.usage }
    }

    /// How many leases of `flow` wait for a connection.
    public func waiting(of flow: String) -> Int {
        self.state.withLockedValue { $0.waiting(of: flow) }
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
        let flow = PostgresFlow.current ?? PostgresFlow.background
        let connection = try await self.lease(of: flow, by: waitUntil)
        let leasedAt = Self.now
        connection.deadline = deadline
        let result: Result
        do {
            result = try await body(connection)
        } catch {
            await self.release(connection, of: flow, leasedAt: leasedAt)
            throw error
        }
        await self.release(connection, of: flow, leasedAt: leasedAt)
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

    private func lease(of flow: String, by deadline: NIODeadline) async throws -> PostgresConnection {
        let grant: Machine.Grant
        let now = Self.now
        switch self.state.withLockedValue({ $0.lease(of: flow, now: now) }) {
        case .grant(let granted): grant = granted
        case .fail(let failure): throw Self.error(failure)
        case .wait: grant = try await self.waitForGrant(of: flow, until: deadline)
        }
        let grantedAt = Self.now
        do {
            return try await self.connection(for: grant, by: deadline)
        } catch {
            // Granted and failed: the grant ends here.
            let now = Self.now
            let granted = self.state.withLockedValue { state in
                state.leaseEnded(of: flow, held: now - grantedAt, now: now)
                return state.dispatch(now: now)
            }
            Self.resume(granted)
            throw error
        }
    }

    /// The connection a grant gives: the idle one (replaced when the server dropped it), or
    /// one opened in the slot.
    private func connection(for grant: Machine.Grant, by deadline: NIODeadline) async throws -> PostgresConnection {
        switch grant {
        case .connection(let pooled):
            if pooled.connection.connection.checkAlive() { return pooled.connection }
            self.logger.debug("replacing a dropped postgres connection")
            self.state.withLockedValue { $0.replace(pooled) }
            await pooled.connection.close()
            return try await self.openConnection(by: deadline)
        case .openSlot:
            return try await self.openConnection(by: deadline)
        }
    }

    /// Opens a connection in a slot already counted in `openCount`; frees the slot on failure.
    ///
    /// A connection that is not open by `deadline` (a server that accepts and never answers
    /// holds libpq's connect up to its `connect_timeout`) fails the lease then; the attempt
    /// runs out on its thread, and what it opened is closed, its slot freed.
    private func openConnection(by deadline: NIODeadline) async throws -> PostgresConnection {
        let configuration = self.configuration
        let eventLoop = self.eventLoopGroup.any()
        let opening = self.threadPool.runIfActive(eventLoop: eventLoop) { () throws -> LibPQConnection in
            try LibPQConnection.open(configuration)
        }
        let outcome = await Self.result(of: opening, by: deadline, on: eventLoop) {
            opening.whenComplete { result in
                if case .success(let late) = result { late.close() }
                self.freeSlot()
            }
        }
        let opened: LibPQConnection
        switch outcome {
        case .success(let connection):
            opened = connection
        case .failure(is DeadlinePassed):
            throw PostgresError(code: .poolTimeout, message: "no database connection could be opened by the deadline")
        case .failure(let error as PostgresError):
            self.freeSlot()
            throw error
        case .failure:
            self.freeSlot()
            throw PostgresError(code: .poolClosed, message: "the connection pool's threads have shut down")
        }
        do {
            try await opened.setUpSession(configuration, deadline: deadline)
        } catch {
            self.freeSlot()
            throw error
        }
        let connection = PostgresConnection(pooled: opened, logger: self.logger)
        self.state.withLockedValue { $0.opened(Pooled(connection: connection)) }
        return connection
    }

    /// Thrown by `result(of:by:on:whenLate:)` when the deadline came first.
    private struct DeadlinePassed: Error {}

    /// The outcome of `future`, or `DeadlinePassed` if `deadline` comes first (then
    /// `whenLate` runs, on the event loop, and the future is left to complete on its own).
    private static func result<T: Sendable>(
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

    private func waitForGrant(of flow: String, until deadline: NIODeadline) async throws -> Machine.Grant {
        let id = self.nextWaiterID.wrappingAdd(1, ordering: .relaxed).newValue
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Machine.Grant, any Error>) in
                let timeout = self.eventLoopGroup.any().scheduleTask(deadline: deadline) { () -> Void in
                    let now = Self.now
                    let waiter = self.state.withLockedValue { $0.timeOut(id, now: now) }
                    waiter?.resume(with: .failure(Self.error(.timedOut)))
                }
                let waiter = Waiter(continuation: continuation, timeout: timeout)
                // Cancelled before it waited: `cancel` found no waiter, so it is failed here.
                let now = Self.now
                switch self.state.withLockedValue({ $0.wait(id, waiter, of: flow, isCancelled: Task.isCancelled, now: now) }) {
                case .waiting: break
                case .grant(let grant): waiter.resume(with: .success(grant))
                case .fail(let failure): waiter.resume(with: .failure(Self.error(failure)))
                }
            }
        } onCancel: {
            let now = Self.now
            self.state.withLockedValue { $0.cancel(id, now: now) }?.resume(with: .failure(CancellationError()))
        }
    }

    private static func error(_ failure: Machine.Failure) -> any Error {
        switch failure {
        case .closed: PostgresError(code: .poolClosed, message: "the connection pool is closed")
        case .exhausted(let waiting): PostgresError(code: .poolExhausted, message: "\(waiting) leases wait for a database connection already")
        case .cancelled: CancellationError()
        case .timedOut: PostgresError(code: .poolTimeout, message: "no database connection became free by the deadline")
        }
    }

    private func release(_ connection: PostgresConnection, of flow: String, leasedAt: Int64) async {
        connection.deadline = nil
        let pooled = Pooled(connection: connection)
        let now = Self.now
        // A call given up at its deadline may have left a statement running: only closed.
        if connection.hasAbandonedCall {
            self.state.withLockedValue { state in
                state.leaseEnded(of: flow, held: now - leasedAt, now: now)
                state.releaseAbandoned(pooled)
            }
            await connection.close()
            self.freeSlot()
            return
        }
        let fit = connection.isOpen && connection.connection.isIdle && !connection.isCancelRequested
        let (action, granted) = self.state.withLockedValue { state in
            state.leaseEnded(of: flow, held: now - leasedAt, now: now)
            // The end of this lease may have raised other flows' shares: `dispatch`.
            return (state.release(pooled, fit ? .reusable : .unusable, now: now), state.dispatch(now: now))
        }
        Self.resume(granted)
        switch action {
        case .handOver(let pooled, let waiter):
            waiter.resume(with: .success(.connection(pooled)))
        case .keep:
            break
        case .close(let pooled):
            await pooled.connection.close()
            self.freeSlot()
        }
    }

    /// Gives a freed slot to the waiter whose turn it is, who will open a connection, or frees it.
    private func freeSlot() {
        let now = Self.now
        self.state.withLockedValue { $0.slotFreed(now: now) }?.resume(with: .success(.openSlot))
    }

    private static func resume(_ granted: [(waiter: Waiter, grant: Machine.Grant)]) {
        for (waiter, grant) in granted { waiter.resume(with: .success(grant)) }
    }

    /// Nanoseconds of a monotonic clock, the pool's time for its machine.
    private static var now: Int64 { Int64(NIODeadline.now().uptimeNanoseconds) }

    // MARK: - Service

    /// Keeps the pool open until graceful shutdown or cancellation, then closes it.
    public func run() async throws {
        try? await gracefulShutdown()
        await self.close()
    }

    /// Closes idle connections, fails waiting leases, and closes leased connections as
    /// they come back.
    public func close() async {
        let (idle, waiters) = self.state.withLockedValue { $0.close() }
        for waiter in waiters { waiter.resume(with: .failure(Self.error(.closed))) }
        self.watchdog.withLockedValue { $0?.cancel() }
        for pooled in idle { await pooled.connection.close() }
        self.logger.debug("postgres connection pool closed")
    }

    deinit {
        self.watchdog.withLockedValue { $0?.cancel() }
        self.threadPool.shutdownGracefully { _ in }
    }
}
