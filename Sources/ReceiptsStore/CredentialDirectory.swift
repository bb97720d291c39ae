import Postgres
import Synchronization

/// Every tenant's id and the hash of its API key, held in memory and reloaded from the
/// database (`receipts.credential_directory()`) as a whole.
///
/// Credentials are checked on every request, and most guessed ones are new each time: a
/// cache of answers per credential would not stop a flood of random API keys, or of forged
/// tokens naming random tenants, from costing one query each and starving the pool. The
/// directory answers both from memory instead:
/// - a snapshot answers for at most `maximumAge` (then the next lookup reloads it), so a key
///   replaced elsewhere stops working within that time;
/// - a credential the snapshot does not know reloads it only if it is at least
///   `reloadAfterMiss` old, so a tenant created by another process (`receiptsd tenant
///   create`, another instance) works within that time, and guessed credentials cost at most
///   one reload per interval, whatever their number;
/// - tenants created and keys replaced through this process's store are in it at once;
/// - a caller that must know sooner of a change made elsewhere asks for a snapshot of a
///   younger `maximumAge` (an open stream's periodic re-check of its credential: a key replaced
///   or removed in the database ends the stream within about one and a half intervals).
///
/// Its size is the number of tenants, whatever callers guess. Concurrent reloads share one
/// query. A reload that fails throws (the caller answers 503, never 401: a client must not
/// throw away a valid credential during an outage).
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
        var keyHashesByTenant: [String: [UInt8]] = [:]
        var loadedAt: ContinuousClock.Instant

        mutating func record(tenant: String, apiKeyHash: [UInt8]) {
            if let old = self.keyHashesByTenant[tenant] { self.tenantsByKeyHash[old] = nil }
            self.keyHashesByTenant[tenant] = apiKeyHash
            self.tenantsByKeyHash[apiKeyHash] = tenant
        }
    }

    private struct State {
        var snapshot: Snapshot?
        var isLoading = false
        /// Callers waiting for the reload under way.
        var waiting: [CheckedContinuation<Snapshot, any Error>] = []
        /// Credentials this process recorded while a reload ran (its rows may predate them).
        var recordedDuringLoad: [(tenant: String, apiKeyHash: [UInt8])] = []
        var lastFailure: PostgresError?
    }

    public let options: Options
    private let pool: PostgresConnectionPool
    private let state = Mutex(State())

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
        try await self.lookUp { $0.keyHashesByTenant[tenant] != nil ? true : nil } ?? false
    }

    /// Notes a tenant created, or a key replaced, by this process.
    func record(tenant: String, apiKeyHash: [UInt8]) {
        self.state.withLock { state in
            state.snapshot?.record(tenant: tenant, apiKeyHash: apiKeyHash)
            if state.isLoading { state.recordedDuringLoad.append((tenant, apiKeyHash)) }
        }
    }

    private func lookUp<Found>(maximumAge: Duration? = nil, _ find: (Snapshot) -> Found?) async throws -> Found? {
        let asked = ContinuousClock.now
        let maximumAge = min(maximumAge ?? self.options.maximumAge, self.options.maximumAge)
        var snapshot = self.state.withLock { $0.snapshot }
        if snapshot == nil || asked - snapshot!.loadedAt > maximumAge {
            snapshot = try await self.reload()
        }
        if let found = find(snapshot!) { return found }
        guard asked - snapshot!.loadedAt >= self.options.reloadAfterMiss else { return nil }
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
                for recorded in state.recordedDuringLoad { snapshot.record(tenant: recorded.tenant, apiKeyHash: recorded.apiKeyHash) }
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

    private func load() async throws -> Snapshot {
        let started = ContinuousClock.now
        let rows = try await self.pool.query("SELECT tenant_id, api_key_hash FROM receipts.credential_directory()")
        var snapshot = Snapshot(loadedAt: started)
        snapshot.tenantsByKeyHash.reserveCapacity(rows.count)
        snapshot.keyHashesByTenant.reserveCapacity(rows.count)
        for row in rows {
            snapshot.record(tenant: try row.decode(String.self, column: 0), apiKeyHash: try row.decode(PostgresBytes.self, column: 1).bytes)
        }
        return snapshot
    }
}
