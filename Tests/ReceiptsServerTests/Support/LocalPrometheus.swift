import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// A real Prometheus (Debian's `prometheus`) on loopback for a test: it scrapes one
/// `receiptsd` every second as job `receipts`, with the repository's rules
/// (deploy/prometheus/receipts-rules.yml) loaded in a quick form (`quickRules`), and answers
/// its HTTP API. Ended (SIGKILL) and its data removed by `with`.
struct LocalPrometheus {
    let url: String
    private let process: Process
    private let directory: URL

    /// An alert as Prometheus's `/api/v1/alerts` lists it.
    struct Alert: Sendable {
        let name: String
        /// `pending` or `firing`.
        let state: String
        let labels: [String: String]
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Starts Prometheus scraping `127.0.0.1:<target>`, runs `body`, and ends it whatever happens.
    static func with<Result>(scraping target: Int, _ body: (LocalPrometheus) async throws -> Result) async throws -> Result {
        let prometheus = try await Self.launch(scraping: target)
        do {
            let result = try await body(prometheus)
            prometheus.stop()
            return result
        } catch {
            prometheus.stop()
            throw error
        }
    }

    /// The rules with every `for:` at 3 s and every range at 60 s, evaluated every second, so
    /// that an alert goes pending, fires and resolves within a test's time; the expressions,
    /// labels and annotations are the file's.
    static func quickRules(_ rules: String) -> String {
        var quick = rules.replacing(/for: [0-9]+[smh]/) { _ in "for: 3s" }
        quick = quick.replacing(/\[[0-9]+[smh]\]/) { _ in "[60s]" }
        return quick
    }

    private static func launch(scraping target: Int) async throws -> LocalPrometheus {
        guard let executable = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw Failure(
                description: "prometheus is not installed: the alert tests need Debian's prometheus "
                    + "(scripts/test.sh installs it; or: apt-get install prometheus)")
        }
        let rulesFile = URL(fileURLWithPath: "deploy/prometheus/receipts-rules.yml")
        let rules = try String(contentsOf: rulesFile, encoding: .utf8)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("receipts-prometheus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Self.quickRules(rules).write(to: directory.appendingPathComponent("rules.yml"), atomically: true, encoding: .utf8)
        let configuration = """
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            rule_files:
              - \(directory.appendingPathComponent("rules.yml").path)
            scrape_configs:
              - job_name: receipts
                metrics_path: /metrics
                static_configs:
                  - targets: ["127.0.0.1:\(target)"]
            """
        try configuration.write(to: directory.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
        var failures: [String] = []
        for _ in 0..<3 {
            // Below Linux's ephemeral range, like ReceiptsdProcess; another port on a clash.
            let port = Int.random(in: 20_000...32_000)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = [
                "--config.file=\(directory.appendingPathComponent("prometheus.yml").path)",
                "--storage.tsdb.path=\(directory.appendingPathComponent("data").path)",
                "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
            ]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let prometheus = LocalPrometheus(url: "http://127.0.0.1:\(port)", process: process, directory: directory)
            if await prometheus.waitUntilReady() { return prometheus }
            prometheus.stopProcess()
            failures.append("port \(port): Prometheus did not become ready")
        }
        try? FileManager.default.removeItem(at: directory)
        throw Failure(description: "Prometheus could not be started: \(failures.joined(separator: "; "))")
    }

    private func waitUntilReady() async -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while self.process.isRunning, ContinuousClock.now < deadline {
            if let (status, _) = try? await Self.get("\(self.url)/-/ready"), status == 200 { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// The alerts pending or firing now.
    func alerts() async throws -> [Alert] {
        let data = try await self.api("/api/v1/alerts")
        let alerts = (data as? [String: Any])?["alerts"] as? [[String: Any]] ?? []
        return alerts.map { alert in
            let labels = alert["labels"] as? [String: String] ?? [:]
            return Alert(name: labels["alertname"] ?? "", state: alert["state"] as? String ?? "", labels: labels)
        }
    }

    /// The value of an instant query's first series, if any.
    func value(of query: String) async throws -> Double? {
        let encoded = query.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? query
        let data = try await self.api("/api/v1/query?query=\(encoded)")
        let result = (data as? [String: Any])?["result"] as? [[String: Any]]
        guard let sample = result?.first?["value"] as? [Any], sample.count == 2, let text = sample[1] as? String else { return nil }
        return Double(text)
    }

    /// Waits, polling every 250 ms, until `condition` holds for the alerts named `name`
    /// (none, when it is neither pending nor firing); returns them.
    @discardableResult
    func waitForAlert(
        _ name: String, within limit: Duration, until condition: ([Alert]) -> Bool
    ) async throws -> [Alert] {
        let deadline = ContinuousClock.now + limit
        while true {
            let alerts = try await self.alerts().filter { $0.name == name }
            if condition(alerts) { return alerts }
            guard ContinuousClock.now < deadline else {
                throw Failure(description: "\(name) did not change as expected within \(limit): \(alerts.map(\.state))")
            }
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    private func api(_ path: String) async throws -> Any? {
        let (status, body) = try await Self.get(self.url + path)
        let json = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        guard status == 200, json?["status"] as? String == "success" else {
            throw Failure(description: "Prometheus \(path): \(status) \(body.prefix(400))")
        }
        return json?["data"]
    }

    private static func get(_ url: String) async throws -> (status: UInt, body: String) {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(5))
        let bytes = try await response.body.collect(upTo: 16 << 20)
        return (response.status.code, String(buffer: bytes))
    }

    private func stop() {
        self.stopProcess()
        try? FileManager.default.removeItem(at: self.directory)
    }

    /// SIGKILL: its data is thrown away with the directory, so nothing needs a clean stop.
    private func stopProcess() {
        if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
    }
}
