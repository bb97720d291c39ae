import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

/// Headless Chromium, driven through chromedriver's WebDriver protocol (W3C, JSON over HTTP)
/// with AsyncHTTPClient: a real browser for the tests of web clients (CORS, EventSource,
/// WebSocket, the demo page).
///
/// Debian's `chromium` and `chromium-driver`, which `scripts/test.sh` installs. Without them the
/// tests fail and say so: a suite that skipped them would pass without having tried a browser.
/// Every wait is bounded: the driver's start, each command (`commandTimeout`), and the
/// conditions tests wait for (`waitUntil`).
final class HeadlessBrowser: @unchecked Sendable {
    // Used by one test's task at a time; the process handle is only read after start.
    private let driver: Process
    private let driverURL: String
    private let session: String
    /// Longest one WebDriver command may take.
    static let commandTimeout = TimeAmount.seconds(20)

    private init(driver: Process, driverURL: String, session: String) {
        self.driver = driver
        self.driverURL = driverURL
        self.session = session
    }

    /// Starts chromedriver and one browser session, runs `body`, and ends both whatever happens.
    static func with<Result>(_ body: (HeadlessBrowser) async throws -> Result) async throws -> Result {
        let browser = try await Self.launch()
        do {
            let result = try await body(browser)
            await browser.quit()
            return result
        } catch {
            await browser.quit()
            throw error
        }
    }

    private static func executable(_ name: String) throws -> String {
        let directories = ["/usr/bin", "/usr/local/bin"] + (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        for directory in directories where FileManager.default.isExecutableFile(atPath: "\(directory)/\(name)") {
            return "\(directory)/\(name)"
        }
        throw Failure(
            description: "\(name) is not installed: the browser tests need Debian's chromium and chromium-driver "
                + "(scripts/test.sh installs them; or: apt-get install chromium chromium-driver)")
    }

    private static func launch() async throws -> HeadlessBrowser {
        let driverPath = try Self.executable("chromedriver")
        let chromium = try Self.executable("chromium")
        var failures: [String] = []
        for _ in 0..<3 {
            // Below Linux's ephemeral range, like ReceiptsdProcess; another port on a clash.
            let port = Int.random(in: 20_000...32_000)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: driverPath)
            process.arguments = ["--port=\(port)", "--allowed-ips=127.0.0.1"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let driverURL = "http://127.0.0.1:\(port)"
            guard await Self.waitUntilReady(driverURL, process: process) else {
                Self.stop(process)
                failures.append("port \(port): chromedriver did not become ready")
                continue
            }
            var arguments = ["--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--window-size=1280,860"]
            // Chromium's sandbox refuses to run as root (CI containers): it must be turned off there.
            if getuid() == 0 { arguments.append("--no-sandbox") }
            let capabilities: [String: Any] = [
                "capabilities": [
                    "alwaysMatch": [
                        "browserName": "chrome",
                        "goog:chromeOptions": ["binary": chromium, "args": arguments],
                        "goog:loggingPrefs": ["browser": "ALL"],
                    ]
                ]
            ]
            do {
                let answer = try await Self.command(.POST, "\(driverURL)/session", body: capabilities)
                guard let value = answer as? [String: Any], let session = value["sessionId"] as? String else {
                    throw Failure(description: "chromedriver answered no session: \(String(describing: answer))")
                }
                let browser = HeadlessBrowser(driver: process, driverURL: driverURL, session: session)
                _ = try await browser.command(.POST, "timeouts", body: ["script": 15_000, "pageLoad": 15_000])
                return browser
            } catch {
                Self.stop(process)
                throw error
            }
        }
        throw Failure(description: "chromedriver could not be started: \(failures.joined(separator: "; "))")
    }

    private static func waitUntilReady(_ driverURL: String, process: Process) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(15)
        while process.isRunning, ContinuousClock.now < deadline {
            if let status = try? await Self.command(.GET, "\(driverURL)/status") as? [String: Any], status["ready"] as? Bool == true {
                return true
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Ends the session (closing the browser) and chromedriver.
    func quit() async {
        _ = try? await Self.command(.DELETE, "\(self.driverURL)/session/\(self.session)")
        Self.stop(self.driver)
    }

    /// Ends chromedriver: SIGKILL, as it does not end on SIGTERM (its browser, if any, is gone
    /// with the session, or ends when the driver's pipe closes).
    private static func stop(_ driver: Process) {
        if driver.isRunning { kill(driver.processIdentifier, SIGKILL) }
        driver.waitUntilExit()
    }

    /// Loads a page and waits for its load event.
    func open(_ url: String) async throws {
        _ = try await self.command(.POST, "url", body: ["url": url])
    }

    /// Runs `script` (a function body: `return …`) in the page and gives back its JSON value.
    @discardableResult
    func run(_ script: String, _ arguments: [Any] = []) async throws -> Any? {
        try await self.command(.POST, "execute/sync", body: ["script": script, "args": arguments])
    }

    /// Runs `script`, which ends by calling its last argument (`done(value)`), and gives back
    /// that value: for promises (`fetch`).
    func runAsync(_ script: String, _ arguments: [Any] = []) async throws -> Any? {
        try await self.command(.POST, "execute/async", body: ["script": script, "args": arguments])
    }

    /// Polls `script` until it returns something other than `null`/`false`, and returns
    /// that; fails the test with `description` (and the page's console) past `limit`.
    @discardableResult
    func waitUntil(_ description: String, within limit: Duration = .seconds(10), _ script: String) async throws -> Any {
        let deadline = ContinuousClock.now + limit
        var last: Any?
        while ContinuousClock.now < deadline {
            last = try await self.run(script)
            if let value = last, !(value is NSNull), (value as? Bool) != false { return value }
            try await Task.sleep(for: .milliseconds(25))
        }
        let console = (try? await self.consoleMessages()) ?? []
        throw Failure(
            description: "waited \(limit) for \(description); last answer: \(String(describing: last)); console: \(console.suffix(10))")
    }

    /// The page as a PNG.
    func screenshot() async throws -> Data {
        guard let base64 = try await self.command(.GET, "screenshot") as? String, let png = Data(base64Encoded: base64) else {
            throw Failure(description: "chromedriver answered no screenshot")
        }
        return png
    }

    /// What the page logged to its console (and the browser's network errors) since last asked.
    func consoleMessages() async throws -> [String] {
        let entries = try await self.command(.POST, "se/log", body: ["type": "browser"]) as? [[String: Any]] ?? []
        return entries.compactMap { $0["message"] as? String }
    }

    private func command(_ method: HTTPMethod, _ path: String, body: [String: Any]? = nil) async throws -> Any? {
        try await Self.command(method, "\(self.driverURL)/session/\(self.session)/\(path)", body: body)
    }

    /// One WebDriver command: its `value`, or a thrown error carrying the driver's message.
    private static func command(_ method: HTTPMethod, _ url: String, body: [String: Any]? = nil) async throws -> Any? {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: Self.commandTimeout)
        let bytes = try await response.body.collect(upTo: 64 << 20)
        let json = try JSONSerialization.jsonObject(with: Data(bytes.readableBytesView), options: [.fragmentsAllowed]) as? [String: Any]
        let value = json?["value"]
        guard response.status == .ok else {
            let error = value as? [String: Any]
            throw Failure(
                description: "WebDriver \(method) \(url.split(separator: "/").suffix(2).joined(separator: "/")): \(response.status.code) "
                    + "\(error?["error"] ?? "") \(String(describing: error?["message"] ?? "").prefix(400))")
        }
        return value
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }
}
