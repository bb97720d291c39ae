/// The decisions of a `PostgresConnectionPool`, which it carries out: which lease gets which
/// connection or a slot to open one, who waits and who fails, what happens to a connection
/// that comes back, and what the unresponsive-call watchdog does.
///
/// A value with no locks, no clocks and no I/O: every event returns what the pool must do.
/// `Connection` is a pooled connection (compared by identity in the pool, plain values in the
/// tests), `Waiter` what the pool resumes to answer a waiting lease; the machine hands each
/// waiter back exactly once, from whichever event answers it first.
///
/// Leases wait in one line per *flow* (a tenant, or `PostgresFlow.background`), and what comes
/// free goes to the flows fairly:
/// - to the waiting flow that has held the pool's connections least, by time (`FairQueue`), so
///   a flow whose leases are few or short is served ahead of one that floods the pool with long
///   ones, and flows that flood share alike (the pool reports how long each lease held its
///   connection: `leaseEnded(of:held:now:)`);
/// - while several flows are *active* (leases held or waiting, or one ended less than
///   `activityWindow` ago: `FlowActivity`), a flow holds at most its share of
///   `fairConcurrency` (at least one connection), and waits for more even when connections are
///   idle: a flow that makes one request at a time then finds a connection at once beside
///   another's flood, and its statement shares the database's CPUs with a few of the flood's
///   instead of all of them. A flow alone holds all connections but one, which a flow that
///   arrives then finds free (a lease cannot be taken back). The background flow is neither
///   held back nor counted.
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
    /// Connections that active flows share while several are active.
    let fairConcurrency: Int
    /// Waiting leases, by flow.
    private var waiters: FairQueue<String, Waiter>
    /// Leases granted and not ended, by flow.
    private var held: [String: Int] = [:]
    /// The flows (not the background one) with leases held or waiting, or lately ended.
    private var activity: FlowActivity<String>
    private(set) var isClosed = false

    /// What a lease is charged when it starts, before its holding time is known: about what
    /// a request's statement holds a connection.
    static var leaseEstimate: Int64 { 1_000_000 }

    /// - Parameters:
    ///   - fairConcurrency: connections active flows share while several are active (nil:
    ///     `maximumConnections`).
    ///   - activityWindow: how long a flow stays active after its last lease ended, in
    ///     nanoseconds.
    init(maximumConnections: Int, maximumWaiters: Int, fairConcurrency: Int? = nil, activityWindow: Int64 = 200_000_000) {
        self.maximumConnections = maximumConnections
        self.maximumWaiters = maximumWaiters
        self.fairConcurrency = fairConcurrency ?? maximumConnections
        self.waiters = FairQueue(estimate: Self.leaseEstimate, maximumFlows: maximumConnections + maximumWaiters + 64)
        self.activity = FlowActivity(window: activityWindow)
    }

    /// How many connections are open, how many of them are lent, and how many leases wait.
    var usage: (open: Int, leased: Int, waiting: Int) { (self.openCount, self.openCount - self.idle.count, self.waiters.count) }

    /// How many leases of `flow` wait.
    func waiting(of flow: String) -> Int { self.waiters.count(of: flow) }

    /// How many connections `flow` holds.
    func holding(of flow: String) -> Int { self.held[flow] ?? 0 }

    /// The most connections `flow` may hold now: its share of `fairConcurrency` while other
    /// flows are active; alone, all but one (which a flow that arrives then finds free: no
    /// lease can be taken back, so one is kept); the background flow, any.
    func share(of flow: String) -> Int {
        if flow == PostgresFlow.background { return .max }
        let active = self.activity.count + (self.activity.isActive(flow) ? 0 : 1)
        guard active > 1 else { return max(1, self.maximumConnections - 1) }
        return max(1, self.fairConcurrency / active)
    }

    // MARK: - Leases

    /// A lease of `flow` takes its first look: an idle connection, else a slot if one is
    /// left, else it waits.
    mutating func lease(of flow: String = "", now: Int64 = 0) -> LeaseDecision {
        if self.isClosed { return .fail(.closed) }
        if let grant = self.takeGrant(for: flow, now: now) { return .grant(grant) }
        return .wait
    }

    /// A lease of `flow` sets out to wait as `id` (greater than every id before it): it looks
    /// again (a connection may have come back since its first look), else waits unless
    /// `maximumWaiters` wait already.
    mutating func wait(_ id: Int, _ waiter: Waiter, of flow: String = "", isCancelled: Bool, now: Int64 = 0) -> WaitDecision {
        if self.isClosed { return .fail(.closed) }
        if isCancelled { return .fail(.cancelled) }
        if let grant = self.takeGrant(for: flow, now: now) { return .grant(grant) }
        if self.waiters.count >= self.maximumWaiters { return .fail(.exhausted(waiting: self.waiters.count)) }
        self.waiters.append(id, waiter, of: flow)
        if flow != PostgresFlow.background { self.activity.begin(flow, now: now) }
        return .waiting
    }

    /// A lease of `flow` that was granted has ended (its connection came back, or it failed
    /// to get one opened) after `held` nanoseconds: what its flow has used is corrected by it.
    mutating func leaseEnded(of flow: String, held: Int64, now: Int64 = 0) {
        self.waiters.charge(flow, cost: held)
        if let count = self.held[flow] { self.held[flow] = count > 1 ? count - 1 : nil }
        if flow != PostgresFlow.background { self.activity.end(flow, now: now) }
    }

    /// The waiting lease's task was cancelled; returns whom to fail, nil when it waits no more.
    mutating func cancel(_ id: Int, now: Int64 = 0) -> Waiter? { self.removeWaiter(id, now: now) }

    /// The waiting lease's deadline passed; returns whom to fail, nil when it waits no more.
    /// What it waited for goes to the next waiter, or stays free.
    mutating func timeOut(_ id: Int, now: Int64 = 0) -> Waiter? { self.removeWaiter(id, now: now) }

    /// Grants to waiting leases what is free (idle connections, slots) while some flow that
    /// waits is below its share: after a release or a freed slot, when the end of a lease
    /// may have raised the shares.
    mutating func dispatch(now: Int64 = 0) -> [(waiter: Waiter, grant: Grant)] {
        var granted: [(waiter: Waiter, grant: Grant)] = []
        while !self.isClosed, !self.waiters.isEmpty, !self.idle.isEmpty || self.openCount < self.maximumConnections {
            guard let (_, waiter) = self.popWaiter(now: now) else { break }
            if let connection = self.idle.popLast() {
                granted.append((waiter, .connection(connection)))
            } else {
                self.openCount += 1
                granted.append((waiter, .openSlot))
            }
        }
        return granted
    }

    private mutating func takeGrant(for flow: String, now: Int64) -> Grant? {
        self.activity.expire(now: now)
        // Within a flow, in arrival order; beyond its share, it waits.
        guard self.waiters.count(of: flow) == 0, self.holding(of: flow) < self.share(of: flow) else { return nil }
        let grant: Grant
        if let connection = self.idle.popLast() {
            grant = .connection(connection)
        } else if self.openCount < self.maximumConnections {
            self.openCount += 1
            grant = .openSlot
        } else {
            return nil
        }
        self.waiters.startWithoutWaiting(flow)
        self.held[flow, default: 0] += 1
        if flow != PostgresFlow.background { self.activity.begin(flow, now: now) }
        return grant
    }

    private mutating func removeWaiter(_ id: Int, now: Int64) -> Waiter? {
        guard let (waiter, flow) = self.waiters.remove(id) else { return nil }
        if flow != PostgresFlow.background { self.activity.end(flow, now: now) }
        return waiter
    }

    /// The next waiter, by fair queuing across the flows below their share.
    private mutating func popWaiter(now: Int64) -> (id: Int, waiter: Waiter)? {
        self.activity.expire(now: now)
        // The shares of this moment, looked up once (not from inside the queue's walk).
        var shares: [String: Int] = [:]
        let held = self.held
        for flow in self.waiters.waitingFlows { shares[flow] = self.share(of: flow) }
        guard let next = self.waiters.popNext(where: { held[$0, default: 0] < shares[$0, default: .max] }) else { return nil }
        self.held[next.flow, default: 0] += 1
        return (next.id, next.element)
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

    /// A lent connection comes back: it goes to the next waiter below its flow's share (fair
    /// queuing), else it stays idle.
    mutating func release(_ connection: Connection, _ state: Return, now: Int64 = 0) -> ReleaseAction {
        guard case .reusable = state, !self.isClosed else {
            self.open.remove(connection)
            return .close(connection)
        }
        if let (_, waiter) = self.popWaiter(now: now) { return .handOver(connection, to: waiter) }
        self.idle.append(connection)
        return .keep
    }

    /// A lent connection whose given-up call still runs on it comes back: nothing may touch
    /// it until the call returns; it is closed then, and its slot freed (`slotFreed`).
    mutating func releaseAbandoned(_ connection: Connection) {
        self.open.remove(connection)
    }

    /// A slot's connection is closed, or its opening failed: the next waiter below its flow's
    /// share (fair queuing) gets the slot to open a new one; else it is free. Returns the waiter
    /// to hand it to.
    mutating func slotFreed(now: Int64 = 0) -> Waiter? {
        if !self.isClosed, let (_, waiter) = self.popWaiter(now: now) { return waiter }
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
        return (idle, self.waiters.removeAll())
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
extension PoolStateMachine.Grant: Sendable where Connection: Sendable {}
