import Foundation
import Postgres
import ReceiptsCore
import ReceiptsStore
import TestSupport
import Testing

/// One erasure worker at a time across instances: the lease in `receipts.background_leases`
/// (sql/functions/erasing.sql). On a database of its own: the services of other tests would
/// take the lease too.
@Suite("Erasure lease")
struct ErasureLeaseTests {
    @Test("a step of another holder is refused while the lease runs, and taken over once it expired")
    func oneHolderAtATime() async throws {
        try await Self.withStore { store in
            _ = try await store.requestUserErasure(tenant: "t", user: "a", deletingMessages: false)

            #expect(try await store.erasureStep(holder: "first", lease: .seconds(5), batchSize: 10) != .notHolder)
            #expect(try await store.erasureStep(holder: "second", lease: .seconds(5), batchSize: 10) == .notHolder)
            // The holder renews it with each step; once it stops, the lease runs out.
            #expect(try await store.erasureStep(holder: "first", lease: .seconds(1), batchSize: 10) != .notHolder)
            try await Task.sleep(for: .milliseconds(1200))
            #expect(try await store.erasureStep(holder: "second", lease: .seconds(5), batchSize: 10) != .notHolder)
            #expect(try await store.erasureStep(holder: "first", lease: .seconds(5), batchSize: 10) == .notHolder)
        }
    }

    @Test("a tenant's erasure steps as work of that tenant with no user, until it is done")
    func tenantSteps() async throws {
        try await Self.withStore { store in
            #expect(try await store.requestTenantErasure(tenant: "t") == .pending)
            var steps: [ErasureStep] = []
            while steps.count < 100 {
                let step = try await store.erasureStep(holder: "worker", lease: .seconds(5), batchSize: 10)
                steps.append(step)
                if step == .idle || step == .worked(tenant: "t", user: nil, finished: true) { break }
            }
            #expect(steps.last == .worked(tenant: "t", user: nil, finished: true))
            #expect(steps.dropLast().allSatisfy { $0 == .worked(tenant: "t", user: nil, finished: false) })
            #expect(try await store.erasureStep(holder: "worker", lease: .seconds(5), batchSize: 10) == .idle)
        }
    }

    /// A store on a fresh, migrated database of its own, with tenant `t` and its group `g` of `a`
    /// and `b`.
    static func withStore(_ body: (ReceiptsStore) async throws -> Void) async throws {
        try await TestDatabase.withFreshDatabase { url in
            let configuration = PostgresConfiguration(connectionString: url)
            try await MigrationRunner(directory: TestDatabase.packageRoot.appendingPathComponent("sql/migrations"), logger: TestDatabase.logger)
                .applyPending(to: configuration)
            let pool = PostgresConnectionPool(
                configuration: ReceiptsStore.serviceSessions(of: configuration), options: .init(maximumConnections: 2), logger: TestDatabase.logger)
            let store = ReceiptsStore(pool: pool, logger: TestDatabase.logger)
            #expect(try await store.createTenant(id: "t", name: "t", apiKeyHash: [1], tokenSecret: [1]))
            _ = try await store.putChat(tenant: "t", chat: "g", kind: .group, members: ["a", "b"])
            do {
                try await body(store)
            } catch {
                await pool.close()
                throw error
            }
            await pool.close()
        }
    }
}
