import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

@Suite("Deployment files")
struct DeploymentFilesTests {
    @Test("docker-compose.yml is valid (docker-compose config -q)")
    func composeFileIsValid() async throws {
        let candidates = ["/usr/bin/docker-compose", "/usr/local/bin/docker-compose"]
        let executable = try #require(
            candidates.first { FileManager.default.isExecutableFile(atPath: $0) },
            "docker-compose is not installed (scripts/test.sh installs it)"
        )
        let result = try await TestDatabase.run(
            executable,
            arguments: ["-f", "docker-compose.yml", "config", "-q"],
            allowFailure: true
        )
        #expect(result.status == 0, "\(result.errorOutput)")
    }

    @Test("the observability profile adds Prometheus with the rules and Grafana with the dashboard, and only with the profile")
    func composeObservabilityProfile() async throws {
        let config = try await TestDatabase.run(
            "/usr/bin/env", arguments: ["docker-compose", "-f", "docker-compose.yml", "--profile", "observability", "config"], allowFailure: true)
        try #require(config.status == 0, "\(config.errorOutput)")
        // Each service's block of the normalized file (two spaces in, under `services:`), and
        // its profiles. (Debian's docker-compose 1.29 lists every service in `config`
        // whatever the profile; `up` starts only those of the profiles given.)
        var profiles: [String: [String]] = [:]
        var service: String?
        var inProfiles = false
        for line in config.output.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  "), !line.hasPrefix("   "), line.hasSuffix(":") {
                service = String(line.dropFirst(2).dropLast())
                profiles[service!] = []
                inProfiles = false
            } else if !line.hasPrefix(" ") {
                service = nil
            } else if line == "    profiles:" {
                inProfiles = true
            } else if inProfiles, line.hasPrefix("    - "), let service {
                profiles[service, default: []].append(String(line.dropFirst(6)))
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), !line.hasPrefix("    - ") {
                inProfiles = false
            }
        }
        #expect(profiles == ["postgres": [], "receiptsd": [], "prometheus": ["observability"], "grafana": ["observability"]])
        for mounted in ["deploy/prometheus/receipts-rules.yml", "deploy/prometheus/prometheus.yml", "deploy/grafana/receipts.json"] {
            #expect(config.output.contains(mounted), "\(mounted) is not mounted")
            #expect(FileManager.default.fileExists(atPath: mounted))
        }
    }

    @Test("docker-compose.yml wires receiptsd to postgres on port 8080")
    func composeWiring() async throws {
        let result = try await TestDatabase.run(
            "/usr/bin/env",
            arguments: ["docker-compose", "-f", "docker-compose.yml", "config"],
            allowFailure: true
        )
        try #require(result.status == 0, "\(result.errorOutput)")
        #expect(result.output.contains("DATABASE_URL: postgresql://receipts:receipts@postgres:5432/receipts"))
        #expect(result.output.contains("8080"))
        #expect(result.output.contains("condition: service_healthy"))
    }

    @Test("receiptsd copied alone into another directory serves openapi.yaml: the image needs no resource bundle beside it")
    func contractIsEmbedded() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("receiptsd-alone-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let copy = directory.appendingPathComponent("receiptsd")
        try FileManager.default.copyItem(atPath: TestDatabase.receiptsdExecutable, toPath: copy.path)

        try await TestDatabase.ensureMigrated()
        let service = try await ReceiptsdProcess.start(
            arguments: ["--no-migrate"], environment: ["DATABASE_URL": TestDatabase.url, "LOG_LEVEL": "error"], executable: copy.path)
        defer { service.kill() }
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: service.baseURL + "/openapi.yaml"), timeout: .seconds(5))
        #expect(response.status == .ok)
        let body = try await response.body.collect(upTo: 1 << 20)
        #expect(String(buffer: body) == (try String(contentsOfFile: "openapi.yaml", encoding: .utf8)))
    }

    @Test("docker-compose.yml starts no known admin token: without RECEIPTS_ADMIN_TOKEN the admin API is off")
    func composeHasNoDefaultAdminToken() async throws {
        let result = try await TestDatabase.run(
            "/usr/bin/env",
            arguments: ["-u", "RECEIPTS_ADMIN_TOKEN", "docker-compose", "-f", "docker-compose.yml", "config"],
            allowFailure: true
        )
        try #require(result.status == 0, "\(result.errorOutput)")
        // receiptsd treats an empty value as unset: the admin API answers 404.
        let adminTokenLines = result.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix("RECEIPTS_ADMIN_TOKEN") }
        #expect(adminTokenLines.count == 1)
        #expect(adminTokenLines.allSatisfy { ["RECEIPTS_ADMIN_TOKEN: ''", "RECEIPTS_ADMIN_TOKEN:"].contains($0) }, "\(adminTokenLines)")
        #expect(!result.output.contains("change-me"))
    }
}
