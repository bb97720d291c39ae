import Foundation
import OpenAPIRuntime
import ReceiptsClient
import TestSupport
import Testing

/// A real `receiptsd serve` (the built executable) on the test database, for one test: the
/// client is tested the way a backend uses it, over HTTP, against the process.
final class ReceiptsService: @unchecked Sendable {
    // Mutable only through `restart()`, which a test calls from its own task.
    private(set) var process: Process
    let port: Int
    let adminToken: String

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    private init(process: Process, port: Int, adminToken: String) {
        self.process = process
        self.port = port
        self.adminToken = adminToken
    }

    /// Starts receiptsd on a free port below Linux's ephemeral range and waits until it is
    /// ready; a port some other program holds makes it exit at once, then another is tried.
    static func start() async throws -> ReceiptsService {
        try await TestDatabase.ensureMigrated()
        let adminToken = TestDatabase.uniqueName("admin")
        for _ in 0..<5 {
            let port = Int.random(in: 20_000...32_000)
            if let process = try await launch(port: port, adminToken: adminToken) {
                return ReceiptsService(process: process, port: port, adminToken: adminToken)
            }
        }
        throw StartFailure(description: "receiptsd did not become ready on any of 5 ports")
    }

    /// Kills the process (no graceful goodbye: as a crash or a lost host) and starts a new
    /// one on the same port, so clients find it at the same address.
    func restart(whileDown: () async throws -> Void = {}) async throws {
        kill()
        try await whileDown()
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if let process = try await Self.launch(port: port, adminToken: adminToken) {
                self.process = process
                return
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw StartFailure(description: "receiptsd did not start again on port \(port)")
    }

    /// Stops the process at once, if it still runs, and waits for it.
    func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// A client with the admin token.
    var admin: ReceiptsClient { ReceiptsClient(baseURL: baseURL, credential: adminToken) }

    /// A new tenant of its own and a client with its key: tests never share state.
    func tenantClient(
        configuration: ReceiptsClient.Configuration = .init(), middlewares: [any ClientMiddleware] = []
    ) async throws -> ReceiptsClient {
        let tenant = try await admin.createTenant(named: "client tests")
        return ReceiptsClient(baseURL: baseURL, credential: tenant.apiKey, configuration: configuration, middlewares: middlewares)
    }

    /// Runs `body` with a started service, and stops it afterwards.
    static func with(_ body: (ReceiptsService) async throws -> Void) async throws {
        let service = try await start()
        defer { service.kill() }
        try await body(service)
    }

    private static func launch(port: Int, adminToken: String) async throws -> Process? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestDatabase.receiptsdExecutable)
        process.arguments = ["serve", "--port", String(port), "--no-migrate"]
        process.environment = ProcessInfo.processInfo.environment.merging([
            "DATABASE_URL": TestDatabase.url, "RECEIPTS_ADMIN_TOKEN": adminToken, "LOG_LEVEL": "error",
        ]) { $1 }
        try process.run()
        let probe = ReceiptsClient(
            baseURL: URL(string: "http://127.0.0.1:\(port)")!, credential: "",
            configuration: .init(requestTimeout: .milliseconds(500), retry: .never))
        let deadline = ContinuousClock.now + .seconds(60)
        while process.isRunning, ContinuousClock.now < deadline {
            let ready = try? await probe.generated.readyz().ok
            // Still running after the answer: the answer came from this process.
            if ready != nil, process.isRunning { return process }
            try await Task.sleep(for: .milliseconds(50))
        }
        if process.isRunning {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        return nil
    }
}

struct StartFailure: Error, CustomStringConvertible {
    var description: String
}
