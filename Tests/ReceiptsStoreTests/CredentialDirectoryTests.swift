import Foundation
import NIOCore
import Postgres
import ReceiptsStore
import TestSupport
import Testing

@Suite("Credential directory")
struct CredentialDirectoryTests {
    /// A store on a service pool of one connection that waits at most `leaseTimeout` for it.
    func makeStore(reloadAfterMiss: Duration, leaseTimeout: TimeAmount = .seconds(5)) -> (ReceiptsStore, PostgresConnectionPool) {
        let pool = PostgresConnectionPool(
            configuration: ReceiptsStore.serviceSessions(of: TestDatabase.configuration),
            options: .init(maximumConnections: 1, leaseTimeout: leaseTimeout),
            logger: TestDatabase.logger
        )
        let store = ReceiptsStore(
            pool: pool, logger: TestDatabase.logger, credentialOptions: .init(maximumAge: .seconds(60), reloadAfterMiss: reloadAfterMiss))
        return (store, pool)
    }

    static func randomBytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0 ... 255) } }

    @Test("guessed API keys and tenant ids are answered from memory, without a query each")
    func guessesCostNoQuery() async throws {
        try await TestDatabase.ensureMigrated()
        let (store, pool) = makeStore(reloadAfterMiss: .seconds(60), leaseTimeout: .seconds(1))
        let tenant = TestDatabase.uniqueName("directory")
        let hash = Self.randomBytes(32)
        #expect(try await store.createTenant(id: tenant, name: "directory", apiKeyHash: hash, tokenSecret: [1]))
        // The first lookup loads the directory; the tenant created here is in it.
        #expect(try await store.credentials.tenant(apiKeyHash: hash) == tenant)

        // With the pool's only connection taken, anything that needed the database would
        // wait a second for it and fail. A thousand guesses answer at once.
        try await pool.withConnection { _ async throws in
            let started = ContinuousClock.now
            for _ in 0..<1000 {
                #expect(try await store.credentials.tenant(apiKeyHash: Self.randomBytes(32)) == nil)
                #expect(try await store.credentials.hasTenant(TestDatabase.uniqueName("guessed")) == false)
            }
            #expect(try await store.credentials.hasTenant(tenant))
            #expect(ContinuousClock.now - started < .milliseconds(900))
        }
        await pool.close()
    }

    @Test("a tenant created elsewhere is known within reloadAfterMiss; one created through the store at once")
    func newTenantsAreKnownSoon() async throws {
        try await TestDatabase.ensureMigrated()
        let (store, pool) = makeStore(reloadAfterMiss: .milliseconds(300))
        let (elsewhere, otherPool) = makeStore(reloadAfterMiss: .milliseconds(300))
        _ = try await store.credentials.hasTenant("anyone")  // loads the directory

        let hash = Self.randomBytes(32)
        let tenant = TestDatabase.uniqueName("elsewhere")
        #expect(try await elsewhere.createTenant(id: tenant, name: "elsewhere", apiKeyHash: hash, tokenSecret: [1]))
        try await Task.sleep(for: .milliseconds(350))
        #expect(try await store.credentials.tenant(apiKeyHash: hash) == tenant)
        #expect(try await store.credentials.hasTenant(tenant))

        // A replaced key through this store: the new one works at once, the old one no more.
        let newHash = Self.randomBytes(32)
        #expect(try await store.replaceAPIKey(tenant: tenant, apiKeyHash: newHash))
        #expect(try await store.credentials.tenant(apiKeyHash: newHash) == tenant)
        #expect(try await store.credentials.tenant(apiKeyHash: hash) == nil)
        await pool.close()
        await otherPool.close()
    }

    @Test("when the database cannot be asked, a lookup throws instead of answering 'unknown'")
    func unreachableDatabaseThrows() async throws {
        let pool = PostgresConnectionPool(
            configuration: PostgresConfiguration(connectionString: "postgresql://receipts@127.0.0.1:1/receipts?connect_timeout=2"),
            logger: TestDatabase.logger
        )
        let store = ReceiptsStore(pool: pool, logger: TestDatabase.logger)
        let error = await #expect(throws: PostgresError.self) { try await store.credentials.tenant(apiKeyHash: Self.randomBytes(32)) }
        #expect(error?.isUnavailability == true)
        await pool.close()
    }
}
