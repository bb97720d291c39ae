import Foundation
import Postgres
import Synchronization

/// Every tenant's id with the hashes of its API keys and its token secret's generation, the
/// token revocations of the last 24 hours, the web origins tenants allow and their rate
/// limits, held in memory and reloaded from the database (`receipts.credential_directory()`,
/// `receipts.current_token_revocations()`, `receipts.tenant_allowed_origins()`,
/// `receipts.tenant_limits()`) as a whole.
///
/// Credentials are checked on every request, and most guessed ones are new each time: a
/// cache of answers per credential would not stop a flood of random API keys, or of forged
/// tokens naming random tenants, from costing one query each and starving the pool. The
/// directory answers both from memory instead:
/// - a change of credentials anywhere (a key added or removed, tokens revoked, a secret
///   rotated, a tenant erased) is announced by a NOTIFY that every instance hears
///   (`invalidate(tenant:)`): nothing loaded before answers any more, and the streams of that
///   tenant waiting in `waitForChange` wake to check their credential;
/// - a snapshot answers for at most `maximumAge` (then the next lookup reloads it), so a
///   change made without that NOTIFY (in psql) holds within that time;
/// - a credential the snapshot does not know reloads it only if it is at least
///   `reloadAfterMiss` old, so a tenant created by another process (`receiptsd tenant
///   create`, another instance) works within that time, and guessed credentials cost at most
///   one reload per interval, whatever their number;
/// - tenants created and keys replaced through this process's store are in it at once;
/// - a caller that must know sooner of a change made elsewhere asks for a snapshot of a
///   younger `maximumAge` (an open stream's periodic re-check of its credential: a key replaced
///   or removed in the database ends the stream within about one and a half intervals).
///
/// Its size is the number of tenants with their keys, origins (at most 50 a tenant) and
/// limits, and the users revoked in the last day, whatever callers guess. Concurrent reloads
/// share one load. A reload that fails throws (the caller answers 503, never 401: a client
/// must not throw away a valid credential during an outage).
public final class CredentialDirectory: Sendable {
    /// How long answers may be old.
    public struct Options: Sendable {
        /// The longest a snapshot answers before it is reloaded.
        public var maximumAge: Duration
        /// How old a snapshot must be before a credential it does not know reloads it.
        public var reloadAfterMiss: Duration

        public init(maximumAge: Duration = .seconds(60), reloadAfterMiss: Duration = .seconds(1)) {
            self.maximumAge = maximumAge
            self.reloadAfterMiss = reloadAfterMiss
        }
    }

    struct Snapshot: Sendable {
        var tenantsByKeyHash: [[UInt8]: String] = [:]
        /// Every tenant (with or without keys) and its token secret's generation.
        var secretGenerations: [String: Int] = [:]
        /// Per tenant and user: their tokens issued up to then are revoked.
        var revocations: [String: [String: Date]] = [:]
        /// The web origins of tenants that named some (`PUT /v1/settings`).
        var allowedOrigins: [String: [String]] = [:]
        /// The rate limits of tenants that have one of their own.
        var limits: [String: TenantLimits] = [:]
        var loadedAt: ContinuousClock.Instant

        mutating func record(tenant: String, apiKeyHash: [UInt8], replacingKeys: Bool) {
            if replacingKeys { self.tenantsByKeyHash = self.tenantsByKeyHash.filter { $0.value != tenant } }
            self.tenantsByKeyHash[apiKeyHash] = tenant
            if self.secretGenerations[tenant] == nil { self.secretGenerations[tenant] = 0 }
        }
    }

    private struct State {
        var snapshot: Snapshot?
        var isLoading = false
        /// Callers waiting for the reload under way.
        var waiting: [CheckedContinuation<Snapshot, any Error>] = []
        /// Credentials this process recorded while a reload ran (its rows may predate them).
        var recordedDuringLoad: [(tenant: String, apiKeyHash: [UInt8], replacingKeys: Bool)] = []
        /// A snapshot loaded before this (started before a change of credentials was heard)
        /// answers nothing: the next lookup reloads.
        var invalidatedAt: ContinuousClock.Instant?
        var lastFailure: PostgresError?
    }

    /// A task waiting for a change of a tenant's credentials (`waitForChange`).
    private struct Waiter {
        /// nil: a change of any tenant.
        let tenant: String?
        let continuation: CheckedContinuation<Void, Never>
    }

    public let options: Options
    private let pool: PostgresConnectionPool
    private let state = Mutex(State())
    private let waiters = Mutex<[UInt64: Waiter]>([:])
    private let nextWaiter = Atomic<UInt64>(0)

    init(pool: PostgresConnectionPool, options: Options = Options()) {
        self.pool = pool
        self.options = options
    }

    /// The tenant whose API key hashes to `apiKeyHash`; nil when there is none.
    /// - Parameter maximumAge: how old the answer may be, when younger than the options'
    ///   `maximumAge` (concurrent callers still share one reload).
    public func tenant(apiKeyHash: [UInt8], maximumAge: Duration? = nil) async throws -> String? {
        try await self.lookUp(maximumAge: maximumAge) { $0.tenantsByKeyHash[apiKeyHash] }
    }

    /// Whether a tenant with this id exists.
    public func hasTenant(_ tenant: String) async throws -> Bool {
        try await self.secretGeneration(of: tenant) != nil
    }

    /// The generation of the tenant's token secret (it changes with each rotation); nil when
    /// there is no such tenant.
    public func secretGeneration(of tenant: String, maximumAge: Duration? = nil) async throws -> Int? {
        try await self.lookUp(maximumAge: maximumAge) { $0.secretGenerations[tenant] }
    }

    /// Until when the user's tokens are revoked (those issued up to then are refused); nil
    /// when none that may still be unexpired are. Answers from the same snapshot as
    /// `secretGeneration`, without reloading for a user that has none.
    public func tokensRevokedBefore(tenant: String, user: String) async throws -> Date? {
        try await self.lookUp(reloadsOnMiss: false) { $0.revocations[tenant]?[user] }
    }

    /// The web origins the tenant's credentials may be used from, as stored (empty when it
    /// named none). Answers from the same snapshot as the credentials, without reloading for a
    /// tenant that has none: a browser request checks them each time.
    public func allowedOrigins(of tenant: String) async throws -> [String] {
        try await self.lookUp(reloadsOnMiss: false) { $0.allowedOrigins[tenant] } ?? []
    }

    /// The tenant's own rate limit (`TenantLimits.instanceDefault` when it has none).
    /// Answers from the same snapshot as the credentials, without reloading for a tenant that
    /// has none: every request checks it.
    public func limits(of tenant: String) async throws -> TenantLimits {
        try await self.lookUp(reloadsOnMiss: false) { $0.limits[tenant] } ?? .instanceDefault
    }

    /// Notes a tenant created, or its keys replaced, by this process.
    func record(tenant: String, apiKeyHash: [UInt8], replacingKeys: Bool = false) {
        self.state.withLock { state in
            state.snapshot?.record(tenant: tenant, apiKeyHash: apiKeyHash, replacingKeys: replacingKeys)
            if state.isLoading { state.recordedDuringLoad.append((tenant, apiKeyHash, replacingKeys)) }
        }
    }

    /// Credentials of `tenant` (nil: of any tenant) changed in the database (this process or
    /// another instance changed them): nothing loaded so far answers any more, the next lookup
    /// reloads (a reload already under way when this is called may have read the old rows: its
    /// snapshot does not count either), and the tasks waiting for such a change wake.
    public func invalidate(tenant: String? = nil) {
        self.state.withLock { $0.invalidatedAt = .now }
        let woken = self.waiters.withLock { waiters -> [CheckedContinuation<Void, Never>] in
            let matching = waiters.filter { tenant == nil || $0.value.tenant == nil || $0.value.tenant == tenant }
            for key in matching.keys { waiters[key] = nil }
            return matching.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns when the credentials of `tenant` (nil: of any tenant) change (`invalidate`),
    /// after `timeout`, or when the task is cancelled, whichever comes first; true when they
    /// changed.
    public func waitForChange(of tenant: String?, atMost timeout: Duration) async -> Bool {
        let id = self.nextWaiter.wrappingAdd(1, ordering: .relaxed).oldValue
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        // Under the lock, so that a cancellation either sees the waiter or
                        // is seen here.
                        let cancelled = self.waiters.withLock { waiters -> Bool in
                            if Task.isCancelled { return true }
                            waiters[id] = Waiter(tenant: tenant, continuation: continuation)
                            return false
                        }
                        if cancelled { continuation.resume() }
                    }
                    return !Task.isCancelled
                } onCancel: {
                    self.waiters.withLock { $0.removeValue(forKey: id) }?.continuation.resume()
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    private func lookUp<Found>(
        maximumAge: Duration? = nil, reloadsOnMiss: Bool = true, _ find: (Snapshot) -> Found?
    ) async throws -> Found? {
        let asked = ContinuousClock.now
        let maximumAge = min(maximumAge ?? self.options.maximumAge, self.options.maximumAge)
        var (snapshot, invalidatedAt) = self.state.withLock { ($0.snapshot, $0.invalidatedAt) }
        if snapshot == nil || asked - snapshot!.loadedAt > maximumAge || invalidatedAt.map({ snapshot!.loadedAt < $0 }) == true {
            snapshot = try await self.reload()
            // A reload joined under way may have begun before the invalidation (and read the
            // old rows): one more, which begins after it.
            invalidatedAt = self.state.withLock { $0.invalidatedAt }
            if invalidatedAt.map({ snapshot!.loadedAt < $0 }) == true { snapshot = try await self.reload() }
        }
        if let found = find(snapshot!) { return found }
        guard reloadsOnMiss, asked - snapshot!.loadedAt >= self.options.reloadAfterMiss else { return nil }
        return find(try await self.reload())
    }

    /// A snapshot loaded now, or by the reload already under way.
    private func reload() async throws -> Snapshot {
        let leads = self.state.withLock { state in
            if state.isLoading { return false }
            state.isLoading = true
            state.recordedDuringLoad = []
            return true
        }
        guard leads else {
            let requested = ContinuousClock.now
            return try await withCheckedThrowingContinuation { continuation in
                let finished = self.state.withLock { state -> Result<Snapshot, any Error>? in
                    if state.isLoading {
                        state.waiting.append(continuation)
                        return nil
                    }
                    // The reload ended between the two looks.
                    if let snapshot = state.snapshot, snapshot.loadedAt >= requested { return .success(snapshot) }
                    return .failure(
                        state.lastFailure ?? PostgresError(code: .connectionFailed, message: "the credential directory could not be loaded"))
                }
                if let finished { continuation.resume(with: finished) }
            }
        }
        let result: Result<Snapshot, any Error>
        do {
            result = .success(try await self.load())
        } catch {
            result = .failure(error)
        }
        let (outcome, waiting) = self.state.withLock { state -> (Result<Snapshot, any Error>, [CheckedContinuation<Snapshot, any Error>]) in
            state.isLoading = false
            var outcome = result
            switch result {
            case .success(var snapshot):
                for recorded in state.recordedDuringLoad {
                    snapshot.record(tenant: recorded.tenant, apiKeyHash: recorded.apiKeyHash, replacingKeys: recorded.replacingKeys)
                }
                state.snapshot = snapshot
                state.lastFailure = nil
                outcome = .success(snapshot)
            case .failure(let error):
                state.lastFailure = error as? PostgresError
            }
            state.recordedDuringLoad = []
            defer { state.waiting = [] }
            return (outcome, state.waiting)
        }
        for continuation in waiting { continuation.resume(with: outcome) }
        return try outcome.get()
    }

    /// The directory as the database holds it: its four reads on one connection, so that a
    /// reload waits for the pool once (a request's authentication may wait for it).
    private func load() async throws -> Snapshot {
        let started = ContinuousClock.now
        return try await self.pool.withConnection { connection in
            let rows = try await connection.query("SELECT tenant_id, api_key_hash, secret_generation FROM receipts.credential_directory()")
            var snapshot = Snapshot(loadedAt: started)
            snapshot.tenantsByKeyHash.reserveCapacity(rows.count)
            snapshot.secretGenerations.reserveCapacity(rows.count)
            for (tenant, hash, generation) in try rows.decode((String, PostgresBytes?, Int).self) {
                if let hash { snapshot.tenantsByKeyHash[hash.bytes] = tenant }
                snapshot.secretGenerations[tenant] = generation
            }
            let revocations = try await connection.query("SELECT tenant_id, user_id, revoked_before FROM receipts.current_token_revocations()")
            for (tenant, user, revokedBefore) in try revocations.decode((String, String, Date).self) {
                snapshot.revocations[tenant, default: [:]][user] = revokedBefore
            }
            let origins = try await connection.query("SELECT tenant_id, allowed_origins FROM receipts.tenant_allowed_origins()")
            for (tenant, allowedOrigins) in try origins.decode((String, [String]).self) {
                snapshot.allowedOrigins[tenant] = allowedOrigins
            }
            let limits = try await connection.query("SELECT tenant_id, requests_per_second, burst FROM receipts.tenant_limits()")
            for (tenant, requestsPerSecond, burst) in try limits.decode((String, Int?, Int?).self) {
                snapshot.limits[tenant] = TenantLimits(requestsPerSecond: requestsPerSecond, burst: burst)
            }
            return snapshot
        }
    }
}
