import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport

/// The built `receiptsd serve`, run as a child process on a port of its own.
struct ReceiptsdProcess {
    let process: Process
    let port: Int

    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts `receiptsd serve` and waits until `/readyz` answers 200.
    ///
    /// The port is taken below Linux's ephemeral range (32768–60999), from which the tests'
    /// own outgoing connections and port-0 listeners take theirs. A port some other program
    /// holds makes receiptsd exit at once; then another port is tried. With `port` (a restart
    /// on the port of a stopped one) only that port is tried.
    /// With `fileLimit`, the process runs under that open-file limit (soft and hard, as
    /// `ulimit -n` in a shell sets it).
    static func start(
        arguments: [String], environment: [String: String], executable: String = TestDatabase.receiptsdExecutable, port: Int? = nil,
        fileLimit: Int? = nil
    ) async throws -> ReceiptsdProcess {
        var exits: [String] = []
        for _ in 0..<(port == nil ? 5 : 1) {
            let port = port ?? Int.random(in: 20_000...32_000)
            let process = Process()
            let serve = ["serve", "--port", String(port)] + arguments
            if let fileLimit {
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", "ulimit -n \(fileLimit) && exec \"$0\" \"$@\"", executable] + serve
            } else {
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = serve
            }
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            try process.run()
            let started = ReceiptsdProcess(process: process, port: port)
            if try await started.waitUntilReady() { return started }
            started.kill()
            exits.append("port \(port): exit status \(process.terminationStatus)")
        }
        throw StartFailure(description: "receiptsd did not become ready (\(exits.joined(separator: "; ")))")
    }

    /// Whether the process answered `/readyz` while running; false once it has exited.
    private func waitUntilReady() async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while process.isRunning, ContinuousClock.now < deadline {
            let response = try? await HTTPClient.shared.execute(HTTPClientRequest(url: baseURL + "/readyz"), timeout: .milliseconds(500))
            // Still running after the answer: the answer came from this process, not from
            // another one that holds the port.
            if response?.status == .ok, process.isRunning { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Stops the process at once, if it still runs, and waits for it.
    func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    struct StartFailure: Error, CustomStringConvertible {
        var description: String
    }
}
