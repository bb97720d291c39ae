import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Postgres

/// Where the benchmark runs: the local PostgreSQL of scripts/postgres.sh by default.
enum BenchEnvironment {
    static func localDatabaseURL() throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "scripts/postgres.sh")
        process.arguments = ["url"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchFailure("scripts/postgres.sh url failed; pass --database-url") }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// An empty database of its own for one benchmark run, dropped afterwards.
struct BenchDatabase: Sendable {
    let name: String
    let url: String
    let admin: PostgresConnectionPool
    /// Connections to the benchmark database as its owner (setup).
    let pool: PostgresConnectionPool
    /// The same, with the session setting the service's pool has (`receipts.notify = off`:
    /// the triggers do not NOTIFY), for the raw reference.
    let servicePool: PostgresConnectionPool

    static func create(on serverURL: String, logger: Logger) async throws -> BenchDatabase {
        let name = "receipts_bench_\(ProcessInfo.processInfo.processIdentifier)"
        let admin = PostgresConnectionPool(configuration: .init(connectionString: serverURL, applicationName: "receipts-bench"), logger: logger)
        // A database name is an identifier; this one is made of [a-z0-9_] only.
        try await admin.withConnection { _ = try await $0.executeScript("DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }
        try await admin.withConnection { _ = try await $0.executeScript("CREATE DATABASE \(name)") }
        let url = try Self.url(serverURL, database: name)
        let pool = PostgresConnectionPool(
            configuration: .init(connectionString: url, applicationName: "receipts-bench"),
            options: .init(maximumConnections: 64, leaseTimeout: .seconds(60)),
            logger: logger
        )
        let servicePool = PostgresConnectionPool(
            configuration: .init(connectionString: url, applicationName: "receipts-bench", settings: [("receipts.notify", "off")]),
            options: .init(maximumConnections: 64, leaseTimeout: .seconds(60)),
            logger: logger
        )
        return BenchDatabase(name: name, url: url, admin: admin, pool: pool, servicePool: servicePool)
    }

    /// `url` with the database `name`: a `postgresql://` URL, its hosts kept as they are (one,
    /// or several for a cluster: `h1:5432,h2:5432`, which URL parsers refuse).
    static func url(_ url: String, database name: String) throws -> String {
        guard let scheme = url.range(of: "://") else { throw BenchFailure("the benchmark needs a postgresql:// URL") }
        let rest = url[scheme.upperBound...]
        let hostsEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let queryStart = rest[hostsEnd...].firstIndex(of: "?") ?? rest.endIndex
        return String(url[..<hostsEnd]) + "/" + name + String(rest[queryStart...])
    }

    func drop() async {
        await self.pool.close()
        await self.servicePool.close()
        _ = try? await self.admin.withConnection { _ = try await $0.executeScript("DROP DATABASE IF EXISTS \(self.name) WITH (FORCE)") }
        await self.admin.close()
    }
}

/// The service under test: started from the release build, or given by URL.
struct BenchService: Sendable {
    let baseURL: String
    let adminToken: String
    let process: Process?

    /// - Parameter environment: variables set for the service beside the bench's own (the
    ///   replicas scenario's `RECEIPTS_REPLICA_DATABASE_URL`); they win over the bench's.
    static func start(
        executable: String, databaseURL: String, poolSize: Int?, environment: [String: String] = [:]
    ) async throws -> BenchService {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw BenchFailure("\(executable) not found: run `swift build -c release --product receiptsd` first")
        }
        // A port below Linux's ephemeral range (32768–60999), which the bench's own
        // connections draw from; a port another program holds makes receiptsd exit at once,
        // and then another is tried.
        for _ in 0..<5 {
            let service = try launch(
                executable: executable, databaseURL: databaseURL, poolSize: poolSize, environment: environment,
                port: Int.random(in: 20_000...32_000))
            if try await service.waitUntilReady() { return service }
            service.stop()
        }
        throw BenchFailure("receiptsd did not become ready")
    }

    private static func launch(
        executable: String, databaseURL: String, poolSize: Int?, environment: [String: String], port: Int
    ) throws -> BenchService {
        let adminToken = UUID().uuidString
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["serve"]
        var settings = [
            "DATABASE_URL": databaseURL, "RECEIPTS_PORT": String(port), "RECEIPTS_ADMIN_TOKEN": adminToken, "LOG_LEVEL": "error",
            // The webhook scenario's receiver listens on loopback.
            "RECEIPTS_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
            // The streams scenario opens all its streams with the tenant's key.
            "RECEIPTS_MAX_STREAMS_PER_TENANT": "10000000",
        ]
        if let poolSize { settings["RECEIPTS_DATABASE_POOL_SIZE"] = String(poolSize) }
        settings.merge(environment) { $1 }
        process.environment = ProcessInfo.processInfo.environment.merging(settings) { $1 }
        try process.run()
        return BenchService(baseURL: "http://127.0.0.1:\(port)", adminToken: adminToken, process: process)
    }

    /// Whether the started process answered `/readyz` (while still running, so the answer
    /// was its own); false once it has exited or after 30 s.
    private func waitUntilReady() async throws -> Bool {
        guard let process else { return true }
        let client = try BenchClient(baseURL: baseURL)
        var ready = false
        for _ in 0..<300 where process.isRunning && !ready {
            let status = try? await client.send(.GET, "/readyz", as: nil, body: nil).0
            ready = status == 200 && process.isRunning
            if !ready { try? await Task.sleep(for: .milliseconds(100)) }
        }
        await client.shutdown()
        return ready
    }

    func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}
