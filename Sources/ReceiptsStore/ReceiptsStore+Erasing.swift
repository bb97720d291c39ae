import Foundation
import Postgres

/// Where an erasure stands.
public struct ErasureStatus: Sendable {
    public let done: Bool
    public let requestedAt: Date
}

/// What asking for a tenant's erasure found.
public enum TenantErasureOutcome: String, Sendable {
    case pending
    case done
    case tenantNotFound = "tenant_not_found"
}

/// What one step of the erasure worker did (`receipts.erasure_step`).
public enum ErasureStep: Sendable, Equatable {
    /// Another instance holds the lease.
    case notHolder
    /// Nothing is pending.
    case idle
    /// A step of a tenant's or a user's erasure (`finished`: it is done now).
    case worked(tenant: String, user: String?, finished: Bool)
}

/// Erasing users and tenants (sql/functions/erasing.sql).
extension ReceiptsStore {
    /// Erases a user: at once they leave every chat and their tokens stop; the rest is the
    /// erasure worker's. A repeat while it is under way answers the same erasure.
    public func requestUserErasure(tenant: String, user: String, deletingMessages: Bool) async throws -> ErasureStatus {
        let rows = try await self.write(
            "SELECT state, requested_at FROM receipts.request_user_erasure(\(tenant), \(user), \(deletingMessages))")
        self.credentials.invalidate(tenant: tenant)
        guard let row = rows.first else { throw UnexpectedOutcome(function: "receipts.request_user_erasure", outcome: "no row") }
        return try ErasureStatus(row: row)
    }

    /// The user's latest erasure; nil when none was asked.
    public func userErasure(tenant: String, user: String) async throws -> ErasureStatus? {
        try await self.withTenant(tenant, readOnly: true) { connection in
            guard let row = try await connection.query("SELECT state, requested_at FROM receipts.user_erasure(\(tenant), \(user))").first
            else { return nil }
            return try ErasureStatus(row: row)
        }
    }

    /// Erases a tenant: its keys and tokens stop at once, its rows go in the background.
    public func requestTenantErasure(tenant: String) async throws -> TenantErasureOutcome {
        let outcome = try Self.outcome(
            TenantErasureOutcome.self, from: try await self.write("SELECT receipts.request_tenant_erasure(\(tenant))"))
        self.credentials.invalidate(tenant: tenant)
        return outcome
    }

    /// One step of the erasure worker as `holder` (its lease lasts `lease` from now). Only a
    /// step that wrote events (deleted messages, or user.erased) tells the event hub: the
    /// other steps, and an idle worker's look every few seconds, wake no stream and no other
    /// instance.
    public func erasureStep(holder: String, lease: Duration, batchSize: Int) async throws -> ErasureStep {
        let rows = try await self.query(
            "SELECT outcome, tenant_id, user_id FROM receipts.erasure_step(\(holder), \(Int(lease.components.seconds))::integer, \(batchSize)::integer)")
        guard let row = rows.first else { throw UnexpectedOutcome(function: "receipts.erasure_step", outcome: "no row") }
        switch try row.decode((String, String?, String?).self) {
        case ("not_holder", _, _): return .notHolder
        case ("idle", _, _): return .idle
        case (let outcome, let tenant?, let user) where ["receipts", "events", "messages", "members", "chats", "users", "done"].contains(outcome):
            // Steps that wrote events: messages deleted, or user.erased.
            if outcome == "messages" || outcome == "done" { self.committedWrites.signal() }
            return .worked(tenant: tenant, user: user, finished: outcome == "done")
        case (let other, _, _): throw UnexpectedOutcome(function: "receipts.erasure_step", outcome: other)
        }
    }
}

extension ErasureStatus {
    /// Decodes `state, requested_at`.
    init(row: PostgresRow) throws {
        let (state, requestedAt) = try row.decode((String, Date).self)
        self.init(done: state == "done", requestedAt: requestedAt)
    }
}
