import Foundation
import HTTPTypes
import TestSupport
import Testing

/// What schemathesis checks of the service beyond the bodies (`scripts/schemathesis.sh`), kept
/// here so that a plain test run sees it too, and the lint of `openapi.yaml`.
@Suite("Contract conformance")
struct ContractConformanceTests {
    @Test("a route's other methods are 405 with Allow, before authentication; a path that is no route is 404")
    func methodNotAllowed() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let cases: [(HTTPRequest.Method, String, String?, String)] = [
                (.trace, "/healthz", nil, "GET"),
                (.post, "/openapi.yaml", nil, "GET"),
                (.post, "/v1/chats/g", tenant.apiKey, "DELETE, GET, PUT"),
                (.post, "/v1/chats/g", nil, "DELETE, GET, PUT"),
                (.patch, "/v1/chats/g/members/a", tenant.apiKey, "DELETE"),
                (.get, "/v1/chats/g/read", tenant.apiKey, "POST"),
                (.put, "/v1/stream", nil, "GET"),
                (.post, "/v1/events", nil, "GET"),
                (.trace, "/admin/v1/tenants", nil, "POST"),
            ]
            for (method, path, credential, allow) in cases {
                let response = try await client.request(method, path, as: credential)
                #expect(response.status == .methodNotAllowed, "\(method) \(path): \(response.body)")
                #expect(response.errorCode == "method_not_allowed", "\(method) \(path)")
                #expect(response.headers[.allow] == allow, "\(method) \(path)")
            }
            for (method, path) in [(HTTPRequest.Method.get, "/v1/nothing"), (.trace, "/v1/chats/g/nothing"), (.get, "/")] {
                let response = try await client.request(method, path, as: tenant.apiKey)
                #expect(response.status == .notFound, "\(method) \(path)")
                #expect(response.errorCode == "not_found", "\(method) \(path)")
                #expect(response.headers[.allow] == nil)
            }
        }
    }

    @Test("with the admin API off, every method of /admin/* is 404, not 405")
    func adminOffIsNotFound() async throws {
        try await TestService.run(adminToken: nil) { client in
            for method in [HTTPRequest.Method.trace, .get, .delete] {
                let response = try await client.request(method, "/admin/v1/tenants", as: nil)
                #expect(response.status == .notFound, "\(method)")
                #expect(response.headers[.allow] == nil)
            }
        }
    }

    @Test("GET /v1/stream without a WebSocket upgrade is 426 with Upgrade: websocket")
    func streamWithoutUpgrade() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let response = try await client.request(.get, "/v1/stream", as: tenant.apiKey)
            #expect(response.status == .upgradeRequired)
            #expect(response.errorCode == "upgrade_required")
            #expect(response.headers[.upgrade] == "websocket")
        }
    }

    @Test(
        "openapi.yaml passes openapi-spec-validator",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: Self.validator.path),
            "openapi-spec-validator is not installed: scripts/test.sh installs it from PyPI (source scripts/openapi-tools.sh; ensure_openapi_tools)"
        )
    )
    func documentIsValid() async throws {
        let result = try await TestDatabase.run(Self.validator.path, arguments: ["openapi.yaml"], allowFailure: true)
        #expect(result.status == 0, "\(result.output)\(result.errorOutput)")
        #expect(result.output.contains("OK"))
    }

    /// Installed by `scripts/openapi-tools.sh`.
    static let validator = TestDatabase.packageRoot.appendingPathComponent(".receipts/openapi-tools/bin/openapi-spec-validator")
}

extension ContractConformanceTests {
    @Test("a tenant's name is 1-200 characters as given and not blank")
    func tenantName() async throws {
        try await TestService.run { client in
            for name in ["   ", "", String(repeating: "n", count: 201), " " + String(repeating: "n", count: 200)] {
                let response = try await client.request(.post, "/admin/v1/tenants", as: TestService.adminToken, json: ["name": name])
                #expect(response.status == .badRequest, "\(name.count) characters")
                #expect(response.errorCode == "invalid_request")
            }
            let response = try await client.request(
                .post, "/admin/v1/tenants", as: TestService.adminToken, json: ["name": " " + String(repeating: "n", count: 199)])
            #expect(response.status == .created)
            #expect(response.json["name"] as? String == String(repeating: "n", count: 199))
        }
    }
}
