import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import ReceiptsServer
import TestSupport
import Testing

@Suite("Health endpoints")
struct HealthTests {
    func makeApp(databaseURL: String = TestDatabase.url) async throws -> some ApplicationProtocol {
        try await buildApplication(
            ReceiptsConfiguration(
                port: 0,
                databaseURL: databaseURL,
                databasePoolSize: 2,
                migrationsDirectory: TestDatabase.packageRoot.appendingPathComponent("sql/migrations")
            ),
            logger: TestDatabase.logger
        )
    }

    @Test("/healthz and /readyz answer 200 when the database is up")
    func healthy() async throws {
        let app = try await makeApp()
        try await app.test(.live) { client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == #"{"status":"ok"}"#)
            }
            // Ready once the event listener has connected; the port opens a moment before.
            try await APIClient(client: client).waitUntilReady()
            let status = try await client.execute(uri: "/readyz", method: .get) { $0.status }
            #expect(status == .ok)
        }
    }

    @Test("/readyz answers 503 in the error shape when the database is unreachable")
    func databaseDown() async throws {
        let app = try await buildApplication(
            ReceiptsConfiguration(
                port: 0,
                databaseURL: "postgresql://receipts@127.0.0.1:1/receipts?connect_timeout=2",
                runMigrations: false,
                migrationsDirectory: TestDatabase.packageRoot.appendingPathComponent("sql/migrations")
            ),
            logger: TestDatabase.logger
        )
        try await app.test(.router) { client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
            }
            try await client.execute(uri: "/readyz", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(String(buffer: response.body) == #"{"error":{"code":"unavailable","message":"the database is unreachable"}}"#)
            }
        }
    }

    @Test("an unknown path is a 404 in the contract's error shape")
    func unknownPath() async throws {
        let app = try await makeApp()
        try await app.test(.router) { client in
            try await client.execute(uri: "/no/such/thing", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(String(buffer: response.body) == #"{"error":{"code":"not_found","message":"not found"}}"#)
            }
        }
    }
}
