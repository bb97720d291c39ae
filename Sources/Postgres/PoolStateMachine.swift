import DequeModule

/// The decisions of a `PostgresConnectionPool`, which it carries out: which lease gets which
/// connection or a slot to open one, who waits and who fails, what happens to a connection
/// that comes back, and what the unresponsive-call watchdog does.
///
/// A value with no locks, no clocks and no I/O: every event returns what the pool must do.
/// `Connection` is a pooled connection (compared by identity in the pool, plain values in the
/// tests), `Waiter` what the pool resumes to answer a waiting lease; the machine hands each
/// waiter back exactly once, from whichever event answers it first.
///
/// A *slot* is the right to have one connection open: `openCount` counts the connections open
/// or being opened, idle or lent, and never exceeds `maximumConnections`. A slot is freed
/// only when its connection is closed (or its opening failed), so a connection still busy
/// closing never lets one more open beside it.
struct PoolStateMachine<Connection: Hashable, Waiter> {
    /// What a lease gets.
    enum Grant: Equatable {
        /// An idle connection (the most recently used: its session is warm).
        case connection(Connection)
        /// A slot, to open a new connection in.
        case openSlot
    }

    /// Why a lease fails without a connection.
    enum Failure: Equatable {
        /// The pool is closed.
        case closed
        /// `maximumWaiters` leases wait already.
        case exhausted(waiting: Int)
        /// The lease's task was cancelled while it waited.
        case cancelled
        /// No connection became free by the lease's deadline.
        case timedOut
    }

    /// What a lease does after its first look.
    enum LeaseDecision: Equatable {
        case grant(Grant)
        case fail(Failure)
        /// Wait: call `wait(_:_:isCancelled:)`.
        case wait
    }

    /// What a lease that set out to wait does.
    enum WaitDecision: Equatable {
        /// Something became free since its first look.
        case grant(Grant)
        case fail(Failure)
        /// It waits, until a release or a freed slot hands it a grant, or `cancel`/`timeOut` fails it.
        case waiting
    }

    /// How a lent connection comes back.
    enum Return {
        /// Open, idle, and no cancel request in flight: fit for the next lease.
        case reusable
        /// Broken, left in a transaction, or with a cancel request that could reach the next
        /// borrower's statement: closed, and its slot freed once it is.
        case unusable
    }

    /// What the pool does with a connection that came back.
    enum ReleaseAction {
        /// Hand it to this waiter.
        case handOver(Connection, to: Waiter)
        /// Keep it idle.
        case keep
        /// Close it; its slot is freed (`slotFreed`) once it is.
        case close(Connection)
    }

    /// What the watchdog does to a connection whose call waits on the server.
    enum WatchdogAction: Equatable {
        /// Ask the server to cancel the call.
        case cancel
        /// Shut the connection down under the call: even a cancel was not acted upon.
        case abandon
    }

    let maximumConnections: Int
    let maximumWaiters: Int

    /// Connections open or being opened, idle or lent.
    private(set) var openCount = 0
    /// Idle connections, the most recently used last.
    private var idle: [Connection] = []
    /// Every open connection, idle or lent, for the watchdog.
    private(set) var open: Set<Connection> = []
    private var waiters: [Int: Waiter] = [:]
    /// Waiting leases in arrival order; ids of those answered otherwise are skipped (and
    /// swept out when they outnumber the waiting ones, so the queue stays bounded).
    private var order: Deque<Int> = []
    private(set) var isClosed = false

    init(maximumConnections: Int, maximumWaiters: Int) {
        self.maximumConnections = maximumConnections
        self.maximumWaiters = maximumWaiters
    }

    /// How many connections are open, how many of them are lent, and how many leases wait.
    var usage: (open: Int, leased: Int, waiting: Int) { (self.openCount, self.openCount - self.idle.count, self.waiters.count) }

    // MARK: - Leases

    /// A lease's first look: an idle connection, else a slot if one is left, else it waits.
    mutating func lease() -> LeaseDecision {
        if self.isClosed { return .fail(.closed) }
        if let grant = self.takeGrant() { return .grant(grant) }
        return .wait
    }

    /// A lease sets out to wait as `id`: it looks again (a connection may have come back
    /// since its first look), else waits unless `maximumWaiters` wait already.
    mutating func wait(_ id: Int, _ waiter: Waiter, isCancelled: Bool) -> WaitDecision {
        if self.isClosed { return .fail(.closed) }
        if isCancelled { return .fail(.cancelled) }
        if let grant = self.takeGrant() { return .grant(grant) }
        if self.waiters.count >= self.maximumWaiters { return .fail(.exhausted(waiting: self.waiters.count)) }
        self.waiters[id] = waiter
        self.order.append(id)
        return .waiting
    }

    /// The waiting lease's task was cancelled; returns whom to fail, nil when it waits no more.
    mutating func cancel(_ id: Int) -> Waiter? { self.removeWaiter(id) }

    /// The waiting lease's deadline passed; returns whom to fail, nil when it waits no more.
    /// What it waited for goes to the next waiter, or stays free.
    mutating func timeOut(_ id: Int) -> Waiter? { self.removeWaiter(id) }

    private mutating func takeGrant() -> Grant? {
        if let connection = self.idle.popLast() { return .connection(connection) }
        if self.openCount < self.maximumConnections {
            self.openCount += 1
            return .openSlot
        }
        return nil
    }

    private mutating func removeWaiter(_ id: Int) -> Waiter? {
        guard let waiter = self.waiters.removeValue(forKey: id) else { return nil }
        if self.order.count > 2 * self.waiters.count + 16 { self.order.removeAll { self.waiters[$0] == nil } }
        return waiter
    }

    private mutating func popWaiter() -> (id: Int, waiter: Waiter)? {
        while let id = self.order.popFirst() {
            if let waiter = self.waiters.removeValue(forKey: id) { return (id, waiter) }
        }
        return nil
    }

    // MARK: - Connections

    /// A connection opened in a granted slot.
    mutating func opened(_ connection: Connection) {
        self.open.insert(connection)
    }

    /// A lease found the idle connection it was granted dropped by the server: it closes it
    /// and opens another in the same slot.
    mutating func replace(_ connection: Connection) {
        self.open.remove(connection)
    }

    /// A lent connection comes back.
    mutating func release(_ connection: Connection, _ state: Return) -> ReleaseAction {
        guard case .reusable = state, !self.isClosed else {
            self.open.remove(connection)
            return .close(connection)
        }
        if let (_, waiter) = self.popWaiter() { return .handOver(connection, to: waiter) }
        self.idle.append(connection)
        return .keep
    }

    /// A lent connection whose given-up call still runs on it comes back: nothing may touch
    /// it until the call returns; it is closed then, and its slot freed (`slotFreed`).
    mutating func releaseAbandoned(_ connection: Connection) {
        self.open.remove(connection)
    }

    /// A slot's connection is closed, or its opening failed: the longest waiter gets the slot
    /// to open a new one; else it is free. Returns the waiter to hand it to.
    mutating func slotFreed() -> Waiter? {
        if !self.isClosed, let (_, waiter) = self.popWaiter() { return waiter }
        self.openCount -= 1
        return nil
    }

    // MARK: - Closing

    /// The pool closes: waiting leases fail with `closed`, idle connections are closed (their
    /// slots with them), lent ones are closed as they come back, and leases fail from now on.
    mutating func close() -> (idle: [Connection], waiters: [Waiter]) {
        self.isClosed = true
        let idle = self.idle
        self.idle = []
        self.openCount -= idle.count
        for connection in idle { self.open.remove(connection) }
        var waiters: [Waiter] = []
        while let (_, waiter) = self.popWaiter() { waiters.append(waiter) }
        return (idle, waiters)
    }

    // MARK: - Watchdog

    /// What the watchdog does to a connection whose current call has waited on the server
    /// for `blocked` (nil: no call waits): past `limit`, it asks the server to cancel it
    /// (once); past `limit` and `abandonAfter`, it shuts the connection down under it.
    static func watchdog(blocked: Duration?, limit: Duration, abandonAfter: Duration, isCancelRequested: Bool) -> WatchdogAction? {
        guard let blocked, blocked > limit else { return nil }
        if blocked > limit + abandonAfter { return .abandon }
        return isCancelRequested ? nil : .cancel
    }
}

extension PoolStateMachine: Sendable where Connection: Sendable, Waiter: Sendable {}
