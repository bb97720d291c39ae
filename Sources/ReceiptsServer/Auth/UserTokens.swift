import Foundation
import JWTKit
import NIOConcurrencyHelpers
import ReceiptsStore

/// Short-lived user tokens: HS256 JWTs signed with the tenant's own secret.
///
/// Claims: `sub` (the user), `tid` (the tenant), `exp`. Verification reads `tid` from the
/// unverified token to pick the tenant's key, then checks the signature and expiry with it;
/// a token whose `tid` was changed fails the signature.
final class UserTokens: Sendable {
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var tid: String
        var exp: ExpirationClaim

        func verify(using algorithm: some JWTAlgorithm) async throws {
            try self.exp.verifyNotExpired()
        }
    }

    private let store: ReceiptsStore
    /// Key collections by tenant; a tenant's secret never changes. Only tenants that exist
    /// get one (`CredentialDirectory`), so guessed tenant ids cannot grow it.
    private let keys = NIOLockedValueBox([String: JWTKeyCollection]())

    init(store: ReceiptsStore) {
        self.store = store
    }

    /// Mints a token for `user` of `tenant`, valid for `ttl` seconds.
    func mint(tenant: String, user: String, ttl: Int) async throws -> (token: String, expiresAt: Date) {
        // Whole seconds, as `exp` carries them.
        let expiresAt = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + Double(ttl)).rounded(.down))
        let claims = Claims(sub: .init(value: user), tid: tenant, exp: .init(value: expiresAt))
        guard let keys = try await self.keyCollection(tenant: tenant) else { throw APIError.unauthorized() }
        let token = try await keys.sign(claims)
        return (token, expiresAt)
    }

    /// The tenant and user of a valid token; nil when it is malformed, tampered with,
    /// expired, or names an unknown tenant.
    ///
    /// - Throws: when the database could not be asked for the tenant's key (the request is
    ///   then unavailable, not unauthorized).
    func verify(_ token: String) async throws -> (tenant: String, user: String)? {
        guard let unverified = try? await JWTKeyCollection().unverified(token, as: Claims.self),
            let keys = try await self.keyCollection(tenant: unverified.tid),
            let claims = try? await keys.verify(token, as: Claims.self)
        else { return nil }
        return (claims.tid, claims.sub.value)
    }

    /// The tenant's signing key; nil for an unknown tenant (known without a query of its own
    /// from the store's `CredentialDirectory`).
    private func keyCollection(tenant: String) async throws -> JWTKeyCollection? {
        if let cached = self.keys.withLockedValue({ $0[tenant] }) { return cached }
        guard try await self.store.credentials.hasTenant(tenant), let secret = try await self.store.tokenSecret(tenant: tenant) else { return nil }
        let collection = JWTKeyCollection()
        await collection.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        self.keys.withLockedValue { $0[tenant] = collection }
        return collection
    }
}
