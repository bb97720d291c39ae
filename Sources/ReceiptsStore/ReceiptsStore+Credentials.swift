import Foundation
import Postgres

/// One of a tenant's API keys, as the admin API lists it (never the key).
public struct APIKeyRecord: Sendable {
    public let keyId: String
    public let createdAt: Date
    public let lastUsedAt: Date?
}

/// What adding an API key did.
public enum AddAPIKeyOutcome: Sendable {
    case added(createdAt: Date)
    /// The tenant has 10 keys already.
    case limitReached
    case tenantNotFound
}

/// What removing an API key did.
public enum RemoveAPIKeyOutcome: String, Sendable {
    case removed
    case keyNotFound = "key_not_found"
    case tenantNotFound = "tenant_not_found"
}

/// Changing a tenant's credentials (docs/api.md, "Deleting, erasing and credentials"). Every
/// change notifies every instance (`receipts.credentials_changed`); this process's own
/// directory drops what it held at once, before the answer.
extension ReceiptsStore {
    /// Adds an API key (its hash) under `keyId`.
    public func addAPIKey(tenant: String, keyId: String, apiKeyHash: [UInt8]) async throws -> AddAPIKeyOutcome {
        let rows = try await self.query("SELECT outcome, created_at FROM receipts.add_api_key(\(tenant), \(keyId), \(PostgresBytes(apiKeyHash)))")
        guard let row = rows.first else { throw UnexpectedOutcome(function: "receipts.add_api_key", outcome: "no row") }
        switch try row.decode((String, Date?).self) {
        case ("added", let createdAt?):
            self.credentials.record(tenant: tenant, apiKeyHash: apiKeyHash)
            return .added(createdAt: createdAt)
        case ("limit_reached", _): return .limitReached
        case ("tenant_not_found", _): return .tenantNotFound
        case (let other, _): throw UnexpectedOutcome(function: "receipts.add_api_key", outcome: other)
        }
    }

    /// The tenant's API keys, oldest first; nil for an unknown tenant or one being erased.
    public func apiKeys(tenant: String) async throws -> [APIKeyRecord]? {
        try await self.withTenant(tenant, readOnly: true) { connection in
            guard try await !connection.query("SELECT 1 FROM receipts.tenants WHERE tenant_id = \(tenant) AND erasing_since IS NULL").isEmpty else { return nil }
            return try await connection.query(
                "SELECT key_id, created_at, last_used_at FROM receipts.api_keys WHERE tenant_id = \(tenant) ORDER BY created_at, key_id"
            ).map { row in
                let (keyId, createdAt, lastUsedAt) = try row.decode((String, Date, Date?).self)
                return APIKeyRecord(keyId: keyId, createdAt: createdAt, lastUsedAt: lastUsedAt)
            }
        }
    }

    /// Removes an API key (the last one too).
    public func removeAPIKey(tenant: String, keyId: String) async throws -> RemoveAPIKeyOutcome {
        let outcome = try Self.outcome(
            RemoveAPIKeyOutcome.self, from: try await self.query("SELECT receipts.remove_api_key(\(tenant), \(keyId))"))
        if outcome == .removed { self.credentials.invalidate() }
        return outcome
    }

    /// Revokes every token of `user` issued up to now; returns that moment.
    public func revokeTokens(tenant: String, user: String) async throws -> Date {
        let revokedBefore = try await self.query("SELECT receipts.revoke_user_tokens(\(tenant), \(user))").scalar(Date.self)
        self.credentials.invalidate()
        return revokedBefore
    }

    /// Signs the tenant's new tokens with `secret` from now on; nil for an unknown tenant.
    public func rotateTokenSecret(tenant: String, secret: [UInt8]) async throws -> Date? {
        let rotatedAt = try await self.query("SELECT receipts.rotate_token_secret(\(tenant), \(PostgresBytes(secret)))").scalar(Date?.self)
        if rotatedAt != nil { self.credentials.invalidate() }
        return rotatedAt
    }

    /// Records that requests used the keys with these hashes (`last_used_at`).
    public func recordAPIKeyUse(hashes: [[UInt8]]) async throws {
        guard !hashes.isEmpty else { return }
        _ = try await self.query("SELECT receipts.record_api_key_use(\(hashes.map(PostgresBytes.init))::bytea[])")
    }
}
