import Foundation

// The face, continued: erasing (docs/api.md, "Deleting, erasing and credentials").

extension ReceiptsClient {
    public typealias UserErasure = Components.Schemas.UserErasure
    public typealias UserErasureStatus = Components.Schemas.UserErasureStatus
    public typealias TenantErasure = Components.Schemas.TenantErasure

    /// Erases a user (tenant key): at once out of every chat with their tokens stopped; their
    /// receipts and events go in the background (`erasure(of:)` says when it is done).
    /// - Parameter deletingMessages: delete every message they sent too.
    @discardableResult
    public func erase(user userID: String, deletingMessages: Bool = false) async throws -> UserErasure {
        let output = try await Self.call {
            try await generated.eraseUser(path: .init(userId: userID), query: .init(messages: deletingMessages ? .delete : nil))
        }
        guard case .accepted(let accepted) = output else { throw Self.unexpected(output, "eraseUser") }
        return try accepted.body.json
    }

    /// Where the user's latest erasure stands (tenant key).
    public func erasure(of userID: String) async throws -> UserErasureStatus {
        try await Self.call { try await generated.getUserErasure(path: .init(userId: userID)) }.ok.body.json
    }

    /// Erases a tenant and all its data (admin token); its keys and tokens stop at once.
    @discardableResult
    public func erase(tenant tenantID: String) async throws -> TenantErasure {
        let output = try await Self.call { try await generated.eraseTenant(path: .init(tenantId: tenantID)) }
        guard case .accepted(let accepted) = output else { throw Self.unexpected(output, "eraseTenant") }
        return try accepted.body.json
    }
}
