import Foundation
import HTTPTypes
import Postgres
import TestSupport
import Testing

/// docs/api.md, "Webhooks": every delivery carries the Standard Webhooks headers, checked here
/// with the reference verifier (`standardwebhooks` from PyPI, installed by scripts/test.sh
/// beside the OpenAPI linter), unmodified, as a receiver's backend would.
@Suite("Standard Webhooks")
struct StandardWebhooksTests {
    /// The Python of the virtual environment scripts/openapi-tools.sh makes.
    static let python = TestDatabase.packageRoot.appendingPathComponent(".receipts/openapi-tools/bin/python")

    /// Runs the reference verifier on one request: `Webhook(secret).verify(body, headers)`,
    /// with the secret as the library takes it (the `whsec_` text, or the bytes of any other).
    /// Returns what it printed: "verified", or the verification error.
    static func verify(_ request: WebhookReceiver.Request, secret: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("swh-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(request.body).write(to: directory.appendingPathComponent("body"))
        try JSONSerialization.data(withJSONObject: request.headers).write(to: directory.appendingPathComponent("headers.json"))
        let script = """
            import json, sys
            from standardwebhooks.webhooks import Webhook, WebhookVerificationError
            secret = sys.argv[1] if sys.argv[1].startswith("whsec_") else sys.argv[1].encode()
            headers = json.load(open(sys.argv[2] + "/headers.json"))
            try:
                Webhook(secret).verify(open(sys.argv[2] + "/body", "rb").read(), headers)
                print("verified")
            except WebhookVerificationError as error:
                print("refused: " + str(error))
            """
        let process = Process()
        process.executableURL = Self.python
        process.arguments = ["-c", script, secret, directory.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        process.waitUntilExit()
        return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("deliveries verify with the reference library, under a generated whsec_ secret and under a given plain one; the wrong secret is refused")
    func referenceVerifier() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.python.path),
            "the Python tools are not installed: scripts/test.sh installs them (source scripts/openapi-tools.sh; ensure_openapi_tools)")
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await WebhookTests.withService { client in
            let tenant = try await client.createTenant()
            let created = try await WebhookTests.putWebhook("standard", url: receiver.url, secret: nil, tenant: tenant)
            #expect(created.status == .created)
            let generated = try #require(created.json["secret"] as? String)
            #expect(generated.hasPrefix("whsec_"))
            try await tenant.createChat("team", members: ["alice", "bob"])
            try await tenant.send(in: "team", from: "alice")
            try await tenant.read(in: "team", by: "bob")
            _ = await receiver.waitForEvents(3)
            var requests = receiver.requests
            try #require(!requests.isEmpty)
            var batchIds = Set<String>()
            for request in requests {
                #expect(try Self.verify(request, secret: generated) == "verified")
                #expect(try Self.verify(request, secret: WebhookSecretSample.other).hasPrefix("refused"))
                // The old header as before, keyed by the secret's text.
                #expect(request.isSigned(with: generated))
                let id = try #require(request.headers["webhook-id"])
                #expect(id.hasPrefix("standard_"))
                batchIds.insert(id)
            }
            #expect(batchIds.count == requests.count, "each batch its own webhook-id")

            // A secret given in PUT, not of the whsec_ form: the HMAC key is its bytes.
            #expect(try await WebhookTests.putWebhook("standard", url: receiver.url, secret: WebhookTests.secret, tenant: tenant).status == .ok)
            let before = requests.count
            try await tenant.send(in: "team", from: "bob")
            _ = await receiver.waitForEvents(4)
            requests = receiver.requests
            let later = try #require(requests.dropFirst(before).first)
            #expect(try Self.verify(later, secret: WebhookTests.secret) == "verified")
            #expect(try Self.verify(later, secret: generated).hasPrefix("refused"))
        }
    }
}

extension StandardWebhooksTests {
    @Test("a rotation under continuous deliveries: a receiver with the old secret verifies every delivery, one that switched verifies every delivery after the first under the new; then the old one expires")
    func rotation() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.python.path), "the Python tools are not installed: scripts/test.sh installs them")
        let receiver = try await WebhookReceiver.start()
        defer { Task { await receiver.stop() } }
        try await WebhookTests.withService { client, databaseURL in
            let tenant = try await client.createTenant()
            let old = try #require(try await WebhookTests.putWebhook("rotating", url: receiver.url, secret: nil, tenant: tenant).json["secret"] as? String)
            try await tenant.createChat("team", members: ["alice", "bob"])
            // Deliveries keep going while the secret rotates.
            for index in 0..<10 { try await tenant.send(in: "team", from: "alice", text: "before \(index)") }
            let rotated = try await client.request(.post, "/v1/webhooks/rotating/secret/rotate", as: tenant.apiKey)
            #expect(rotated.status == .ok)
            let new = try #require(rotated.json["secret"] as? String)
            #expect(new.hasPrefix("whsec_") && new != old)
            let expires = try #require((rotated.json["previousExpiresAt"] as? String).flatMap { try? Date($0, strategy: .iso8601) })
            #expect(abs(expires.timeIntervalSinceNow - 24 * 3600) < 60)
            for index in 0..<10 { try await tenant.send(in: "team", from: "alice", text: "after \(index)") }
            _ = await receiver.waitForEvents(20)

            var switched = false
            for request in receiver.requests {
                // The receiver that kept the old secret: every delivery verifies.
                #expect(try Self.verify(request, secret: old) == "verified")
                // The one that switched to the new secret at the first delivery signed with it:
                // every later delivery verifies (each attempt reads the secret as it starts).
                let underNew = try Self.verify(request, secret: new) == "verified"
                #expect(underNew || !switched)
                switched = switched || underNew
                #expect(request.isSigned(with: underNew ? new : old), "Receipts-Signature: the current secret")
            }
            #expect(switched)

            // The overlap ends (as 24 h later): the old secret no longer signs.
            let connection = try await PostgresConnection.connect(to: PostgresConfiguration(connectionString: databaseURL), logger: TestDatabase.logger)
            _ = try await connection.query(
                "UPDATE receipts.webhooks SET previous_secret_expires_at = now() - interval '1 second' WHERE tenant_id = $1", [tenant.id])
            await connection.close()
            let before = receiver.requests.count
            try await tenant.send(in: "team", from: "bob", text: "after the overlap")
            _ = await receiver.waitForEvents(21)
            let last = try #require(receiver.requests.dropFirst(before).last)
            #expect(try Self.verify(last, secret: new) == "verified")
            #expect(try Self.verify(last, secret: old).hasPrefix("refused"))
            #expect(last.headers["webhook-signature"]?.split(separator: " ").count == 1)

            // Only with the tenant key; an unknown webhook is 404.
            let token = try await tenant.token(for: "alice")
            #expect(try await client.request(.post, "/v1/webhooks/rotating/secret/rotate", as: token).status == .forbidden)
            #expect(try await client.request(.post, "/v1/webhooks/nope/secret/rotate", as: tenant.apiKey).status == .notFound)
        }
    }
}

/// A whsec_ secret no webhook of these tests has.
enum WebhookSecretSample {
    static let other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
}
