import ArgumentParser
import Logging
import Postgres
import ReceiptsServer
import ReceiptsStore

/// `receiptsd tenant …`: tenant administration from the command line.
struct Tenant: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage tenants.",
        subcommands: [Create.self]
    )

    /// `receiptsd tenant create NAME`: prints the new tenant's id and API key (shown once).
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a tenant and print its id and API key.")

        @Argument(help: "The tenant's display name.")
        var name: String

        @Option(help: "The tenant id (default: generated).")
        var id: String?

        @Flag(help: "If a tenant with --id exists, give it a new API key instead of failing.")
        var replaceKey = false

        func run() async throws {
            let environment = Environment()
            let logger = makeLogger(level: environment.logLevel())
            let pool = PostgresConnectionPool(
                configuration: PostgresConfiguration(
                    connectionString: try environment.databaseURL(logger: logger),
                    applicationName: "receiptsd-tenant",
                    role: ReceiptsStore.serviceRole
                ),
                options: .init(maximumConnections: 1),
                logger: logger
            )
            let registration = TenantRegistration(store: ReceiptsStore(pool: pool, logger: logger))
            do {
                let tenant = try await registration.register(name: self.name, id: self.id, replacingKey: self.replaceKey)
                print("tenant id: \(tenant.id)")
                print("API key:   \(tenant.apiKey)")
            } catch let failure as TenantRegistration.Failure {
                await pool.close()
                switch failure {
                case .invalidName: throw ValidationError("the name must be 1-200 characters")
                case .invalidId: throw ValidationError("the id must be 1-128 characters of A-Z a-z 0-9 . _ : @ -")
                case .idTaken: throw ValidationError("a tenant with id \(self.id ?? "") exists (use --replace-key for a new key)")
                }
            } catch {
                await pool.close()
                throw error
            }
            await pool.close()
        }
    }
}
