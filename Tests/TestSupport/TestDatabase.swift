import NIOCore
import Foundation
import Logging
import Postgres
import ReceiptsStore

/// The PostgreSQL that tests run against.
///
/// `DATABASE_URL` when set (the test command sets it); otherwise the local cluster of
/// `scripts/postgres.sh`, started on first use, so a bare `swift test` works too.
public enum TestDatabase {
    /// The repository root, found from this file's path.
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // TestSupport
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()

    /// The connection string of the test database.
    public static let url: String = {
        if let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty { return url }
        do {
            return try runScript("scripts/postgres.sh", arguments: ["url"])
        } catch {
            fatalError("no DATABASE_URL and scripts/postgres.sh failed: \(error)")
        }
    }()

    public static var configuration: PostgresConfiguration {
        PostgresConfiguration(connectionString: url, applicationName: "receipts-tests")
    }

    /// A logger that stays quiet unless `LOG_LEVEL` is set.
    public static let logger: Logger = {
        var logger = Logger(label: "receipts.tests")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        return logger
    }()

    /// A pool shared by tests that only need some connection; tests that look at the pool
    /// itself make their own.
    public static let pool = PostgresConnectionPool(
        configuration: configuration,
        options: .init(maximumConnections: 8, leaseTimeout: .seconds(30)),
        logger: logger
    )

    /// A pool whose sessions are set up as the service's (`ReceiptsStore.serviceSessions`),
    /// with the service's default database timeout unless a test is about something else
    /// than timeouts and must not depend on how busy the machine is.
    public static func servicePool(maximumConnections: Int = 4, databaseTimeout: Duration = .seconds(5)) -> PostgresConnectionPool {
        PostgresConnectionPool(
            configuration: ReceiptsStore.serviceSessions(of: Self.configuration, timeout: databaseTimeout),
            options: .init(maximumConnections: maximumConnections, leaseTimeout: TimeAmount(databaseTimeout)), logger: Self.logger)
    }

    /// A store as the service has it, on a new `servicePool()` (close it when done), with a
    /// new tenant of its own.
    public static func serviceStore(
        tenantPrefix: String, databaseTimeout: Duration = .seconds(5)
    ) async throws -> (store: ReceiptsStore, pool: PostgresConnectionPool, tenant: String) {
        try await Self.ensureMigrated()
        let pool = Self.servicePool(databaseTimeout: databaseTimeout)
        let store = ReceiptsStore(pool: pool, logger: Self.logger)
        let tenant = Self.uniqueName(tenantPrefix)
        guard try await store.createTenant(id: tenant, name: tenantPrefix, apiKeyHash: Array(tenant.utf8), tokenSecret: [1]) else {
            throw SetupFailure(description: "tenant \(tenant) exists already")
        }
        return (store, pool, tenant)
    }

    /// A name no other test uses (for tables, tenants, channels).
    public static func uniqueName(_ prefix: String) -> String {
        "\(prefix)_\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16))"
    }

    /// Runs a script of the repository and returns its trimmed standard output (blocking;
    /// for use before any async work, e.g. to find the database URL).
    public static func runScript(_ path: String, arguments: [String], environment: [String: String] = [:]) throws -> String {
        let result = runBlocking(packageRoot.appendingPathComponent(path).path, arguments: arguments, environment: environment)
        if result.status != 0 { throw ProcessFailure(command: path, result: result) }
        return result.output
    }

    /// The result of a finished process.
    public struct ProcessResult: Sendable {
        public var status: Int32
        public var output: String
        public var errorOutput: String
    }

    /// Runs a program to completion and returns what it printed.
    ///
    /// The wait happens on a thread of its own: blocking a Swift concurrency thread while a
    /// child process waits for the database could starve the tasks that would let it go on.
    @discardableResult
    public static func run(
        _ executable: String,
        arguments: [String],
        environment: [String: String] = [:],
        allowFailure: Bool = false
    ) async throws -> ProcessResult {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<ProcessResult, Never>) in
            Thread {
                continuation.resume(returning: runBlocking(executable, arguments: arguments, environment: environment))
            }.start()
        }
        if result.status != 0 && !allowFailure {
            throw ProcessFailure(command: ([executable] + arguments).joined(separator: " "), result: result)
        }
        return result
    }

    private static func runBlocking(_ executable: String, arguments: [String], environment: [String: String]) -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = packageRoot
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        do {
            try process.run()
        } catch {
            return ProcessResult(status: -1, output: "", errorOutput: "could not start \(executable): \(error)")
        }
        // Read both pipes to the end before waiting, so a chatty process cannot block.
        let errorData = LockedData()
        let errorReader = Thread { errorData.set(errors.fileHandleForReading.readDataToEndOfFile()) }
        errorReader.start()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !errorData.isSet { usleep(1000) }
        return ProcessResult(
            status: process.terminationStatus,
            output: String(decoding: outputData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines),
            errorOutput: String(decoding: errorData.value, as: UTF8.self)
        )
    }

    /// A test's setup went wrong (not what the test checks).
    public struct SetupFailure: Error, CustomStringConvertible {
        public var description: String
    }

    public struct ProcessFailure: Error, CustomStringConvertible {
        public var command: String
        public var result: ProcessResult
        public var description: String {
            "\(command) exited with \(result.status): \(result.errorOutput)"
        }
    }
}

private final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data: Data?

    func set(_ data: Data) { lock.withLock { self.data = data } }
    var isSet: Bool { lock.withLock { data != nil } }
    var value: Data { lock.withLock { data ?? Data() } }
}

extension TestDatabase {
    /// Creates an empty database for one test, passes its URL, and drops it afterwards.
    public static func withFreshDatabase<Result>(_ body: (String) async throws -> Result) async throws -> Result {
        let name = uniqueName("receipts_test")
        // CREATE DATABASE takes an identifier; uniqueName yields only [a-z0-9_].
        try await pool.withConnection { _ = try await $0.executeScript("CREATE DATABASE \(name)") }
        let url = try databaseURL(replacingDatabaseWith: name)
        do {
            let result = try await body(url)
            try await pool.withConnection { _ = try await $0.executeScript("DROP DATABASE \(name) WITH (FORCE)") }
            return result
        } catch {
            _ = try? await pool.withConnection { _ = try await $0.executeScript("DROP DATABASE \(name) WITH (FORCE)") }
            throw error
        }
    }

    /// The test URL with another database name (URI or key=value form).
    static func databaseURL(replacingDatabaseWith name: String) throws -> String {
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            guard var components = URLComponents(string: url) else { throw URLError(.badURL) }
            components.path = "/" + name
            return components.string!
        }
        return url + " dbname=" + name
    }

    /// The built `receiptsd` executable (next to the test bundle; `swift build` makes it).
    public static var receiptsdExecutable: String {
        let candidates = [
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("receiptsd"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("receiptsd"),
            packageRoot.appendingPathComponent(".build/debug/receiptsd"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }?.path
            ?? candidates.last!.path
    }
}

extension TestDatabase {
    /// Applies the migrations of `sql/migrations` (and the scripts beside them) to the test database, for tests that use
    /// the schema without starting the service (which would apply them). Safe to call from
    /// many tests at once: the runner serialises on an advisory lock.
    public static func ensureMigrated() async throws {
        let runner = try MigrationRunner(directory: packageRoot.appendingPathComponent("sql/migrations"), logger: logger)
        try await runner.applyPending(to: configuration)
    }
}
