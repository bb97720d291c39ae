import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import ReceiptsServer
import TestSupport
import Testing

/// The connection cap (`RECEIPTS_MAX_CONNECTIONS`, README "Limits, timeouts and faults"): past
/// it a new connection is answered at once and closed, and everything already open is served
/// as before; the process never reaches its open-file limit.
@Suite("Connection cap")
struct ConnectionCapTests {
    @Test("past the cap a new connection gets 503 unavailable (/healthz 200) and is closed; open ones keep being served")
    func pastTheCap() async throws {
        try await TestService.run(configure: { $0.maximumConnections = 4 }) { client in
            // The test client's own connection holds one place; raw ones take the rest.
            var admitted: [RawConnection] = []
            var refusal: RawConnection.Answer?
            for _ in 0..<8 {
                let connection = try await RawConnection.open(port: client.port)
                try await connection.send("GET /readyz HTTP/1.1\r\nHost: receipts\r\n\r\n")
                let answer = try #require(try await connection.answer())
                if answer.status == 200 {
                    admitted.append(connection)
                    continue
                }
                refusal = answer
                #expect(try await connection.waitUntilClosed(within: .seconds(2)), "a refused connection stays open")
                break
            }
            #expect((1...4).contains(admitted.count), "\(admitted.count) admitted under a cap of 4")
            let refused = try #require(refusal, "eight connections admitted under a cap of 4")
            #expect(refused.status == 503)
            #expect(refused.errorCode == "unavailable")
            #expect(refused.header("connection") == "close")
            #expect(refused.header("retry-after") == "1")

            // A liveness probe past the cap still learns the process is alive.
            let probe = try await RawConnection.open(port: client.port)
            try await probe.send("GET /healthz HTTP/1.1\r\nHost: receipts\r\n\r\n")
            #expect(try await probe.answer()?.status == 200)
            #expect(try await probe.waitUntilClosed(within: .seconds(2)))

            // Everything open before goes on as usual, on the same connections.
            for connection in admitted {
                try await connection.send("GET /readyz HTTP/1.1\r\nHost: receipts\r\n\r\n")
                #expect(try await connection.answer()?.status == 200)
                #expect(!connection.isClosed)
            }
            #expect(try await client.request(.get, "/healthz", as: nil).status == .ok)

            // A place freed is taken by the next connection.
            admitted.removeFirst().close()
            let deadline = ContinuousClock.now + .seconds(5)
            var servedAgain = false
            while !servedAgain, ContinuousClock.now < deadline {
                let next = try await RawConnection.open(port: client.port)
                try await next.send("GET /readyz HTTP/1.1\r\nHost: receipts\r\n\r\n")
                servedAgain = try await next.answer()?.status == 200
                next.close()
                if !servedAgain { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(servedAgain, "no connection served after one closed")
            admitted.forEach { $0.close() }
        }
    }

    @Test("receiptsd under a low file limit caps itself below it: many idle connections neither end it nor make it spin")
    func lowFileLimit() async throws {
        try await TestDatabase.ensureMigrated()
        // Before the cap, 400 idle connections under a limit of 256 ended the process (SIGILL:
        // libdispatch aborts when it cannot open a file) or left it spinning.
        let service = try await ReceiptsdProcess.start(
            arguments: ["--no-migrate"], environment: ["DATABASE_URL": TestDatabase.url, "LOG_LEVEL": "error"], fileLimit: 200)
        defer { service.kill() }

        var idle: [RawConnection] = []
        defer { idle.forEach { $0.close() } }
        for _ in 0..<300 {
            let connection = try await RawConnection.open(port: service.port)
            // One request each, unread: a connection under the cap then stays open as an idle
            // keep-alive one (60 s), not only until the head timeout (10 s), however long this
            // test takes on a loaded machine.
            try? await connection.send("GET /healthz HTTP/1.1\r\nHost: receipts\r\n\r\n")
            idle.append(connection)
        }
        // Connections past the cap are answered and closed, or closed at once.
        try await Task.sleep(for: .seconds(1.5))
        #expect(service.process.isRunning)
        let open = idle.filter { !$0.isClosed }.count
        #expect(open > 50 && open < 200, "\(open) of 300 idle connections still open under a file limit of 200")

        // Idle, the process uses (almost) no CPU.
        let before = try Self.cpuSeconds(of: service.process.processIdentifier)
        try await Task.sleep(for: .seconds(2))
        let used = try Self.cpuSeconds(of: service.process.processIdentifier) - before
        #expect(used < 0.4, "\(used) s of CPU in 2 s with idle connections")

        // Alive to a liveness probe, not ready for more, and serving again once they close.
        let probe = try await RawConnection.open(port: service.port)
        try await probe.send("GET /healthz HTTP/1.1\r\nHost: receipts\r\n\r\n")
        #expect(try await probe.answer()?.status == 200)
        let readiness = try await RawConnection.open(port: service.port)
        try await readiness.send("GET /readyz HTTP/1.1\r\nHost: receipts\r\n\r\n")
        #expect(try await readiness.answer()?.status == 503)
        idle.forEach { $0.close() }
        let deadline = ContinuousClock.now + .seconds(10)
        var ready = false
        while !ready, ContinuousClock.now < deadline {
            let response = try? await HTTPClient.shared.execute(HTTPClientRequest(url: service.baseURL + "/readyz"), timeout: .seconds(1))
            ready = response?.status == .ok
            if !ready { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(ready)
        #expect(service.process.isRunning)
    }

    /// User and system CPU time the process has used (`/proc/<pid>/stat`).
    static func cpuSeconds(of pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // After the command name in parentheses: state is field 3, utime 14, stime 15.
        let fields = stat[stat.range(of: ")")!.upperBound...].split(separator: " ")
        let ticks = (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
