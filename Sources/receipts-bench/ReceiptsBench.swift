import ArgumentParser
import Foundation
import Logging
import Postgres

/// `receipts-bench`: measures the service end to end (HTTP and WebSocket on loopback) and
/// the same guarded statement straight at PostgreSQL, and prints one table.
///
/// It creates an empty database, starts the release-built `receiptsd` on it (or uses
/// `--url` with `--admin-token`), and drives it with the figures of BENCHMARKS.md.
@main
struct ReceiptsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipts-bench",
        abstract: "Benchmark Receipts against a real service and PostgreSQL."
    )

    @Option(help: "Use the service at this URL instead of starting one (needs --admin-token and --database-url).")
    var url: String?

    @Option(help: "The admin token of the service at --url.")
    var adminToken: String?

    @Option(help: "PostgreSQL server to create the benchmark database on (default: DATABASE_URL, else scripts/postgres.sh url).")
    var databaseURL: String?

    @Option(help: "The standbys for the replicas scenario, libpq's multi-host form (every node of the cluster may be listed; the database name is replaced). Default: the hosts of --database-url when it names several, else the scenario is skipped.")
    var replicaDatabaseURL: String?

    @Option(help: "The receiptsd executable to start (default: .build/release/receiptsd).")
    var receiptsd: String = ".build/release/receiptsd"

    @Option(help: "Scale factor: 1 is the full run; CI smoke tests use 0.02.")
    var scale: Double = 1

    @Option(help: "Concurrent clients for the throughput figures.")
    var concurrency: Int = 32

    @Option(help: "RECEIPTS_DATABASE_POOL_SIZE of the service the bench starts (default: the service's default).")
    var poolSize: Int?

    @Option(help: "Write the results as JSON to this file.")
    var json: String?

    @Option(help: "Run only these scenarios, comma-separated: \(BenchScenarios.Scenario.allCases.map(\.rawValue).joined(separator: ", ")).")
    var only: String?

    @Option(help: "Group sizes of the large-group scenario, comma-separated (default: 10,100,1000,5000 at the run's scale).")
    var groupSizes: String?

    @Option(help: "Numbers of streams of the streams and streams-sse scenarios, comma-separated; max: as many as the file limit allows (default: 1000,10000 at the run's scale).")
    var streamCounts: String?

    func run() async throws {
        BenchScenarios.raiseOpenFileLimit()
        let streamCounts = try self.streamCounts.map { list in
            try list.split(separator: ",").map { item in
                let text = item.trimmingCharacters(in: .whitespaces)
                if text == "max" { return BenchScenarios.maximumStreams(databasePoolSize: self.poolSize ?? 10) }
                guard let count = Int(text), count >= 1 else {
                    throw ValidationError("--stream-counts takes numbers of streams or max, not '\(item)'")
                }
                return count
            }
        }
        let sizes = try self.groupSizes.map { list in
            try list.split(separator: ",").map { item in
                guard let size = Int(item.trimmingCharacters(in: .whitespaces)), (3...100_000).contains(size) else {
                    throw ValidationError("--group-sizes takes sizes from 3 to 100,000, not '\(item)'")
                }
                return size
            }
        }
        var selected = Set(BenchScenarios.Scenario.allCases)
        if let only {
            selected = Set(try only.split(separator: ",").map { name in
                guard let scenario = BenchScenarios.Scenario(rawValue: name.trimmingCharacters(in: .whitespaces)) else {
                    throw ValidationError("unknown scenario '\(name)' in --only")
                }
                return scenario
            })
        }
        var logger = Logger(label: "receipts-bench")
        logger.logLevel = .warning
        let serverURL = try self.databaseURL ?? ProcessInfo.processInfo.environment["DATABASE_URL"] ?? BenchEnvironment.localDatabaseURL()
        let database = try await BenchDatabase.create(on: serverURL, logger: logger)
        let service: BenchService
        do {
            if let url {
                guard let adminToken else { throw ValidationError("--url needs --admin-token") }
                service = BenchService(baseURL: url, adminToken: adminToken, process: nil)
            } else {
                service = try await BenchService.start(executable: self.receiptsd, databaseURL: database.url, poolSize: self.poolSize)
            }
        } catch {
            await database.drop()
            throw error
        }
        var results = BenchResults()
        do {
            let client = try BenchClient(baseURL: service.baseURL)
            do {
                let tenant = try await client.createTenant(adminToken: service.adminToken)
                let scenarios = BenchScenarios(
                    client: client, tenant: tenant, database: database, scale: self.scale, concurrency: self.concurrency,
                    servicePID: service.process?.processIdentifier, groupSizes: sizes, streamCounts: streamCounts, adminToken: service.adminToken,
                    standbysURL: self.replicaDatabaseURL ?? BenchScenarios.standbysURL(of: serverURL),
                    serviceLaunch: service.process == nil ? nil : (self.receiptsd, self.poolSize))
                try await scenarios.run(selected, into: &results)
            } catch {
                await client.shutdown()
                throw error
            }
            await client.shutdown()
        } catch {
            service.stop()
            await database.drop()
            throw error
        }
        service.stop()
        await database.drop()

        print(results.table())
        if let json { try results.jsonData().write(to: URL(fileURLWithPath: json)) }
    }
}
