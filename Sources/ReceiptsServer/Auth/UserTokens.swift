import Foundation
import JWTKit
import NIOConcurrencyHelpers
import ReceiptsStore

/// Short-lived user tokens: HS256 JWTs signed with the tenant's own secret.
///
/// Claims: `sub` (the user), `tid` (the tenant), `exp`, `iat` (when it was issued, to the
/// millisecond: a revocation refuses the tokens issued up to it). The header's `kid` names
/// the generation of the tenant's secret that signed it (`g<n>`; none: generation 0, tokens
/// from before rotations existed). Verification reads `tid` from the unverified token to pick
/// the tenant's keys, then checks the signature and expiry with them; a token whose `tid`
/// was changed fails the signature.
///
/// What is cached never outlives a change: the keys of a tenant are rebuilt when the
/// `CredentialDirectory` shows another generation of its secret, and revocations are read
/// from the directory, which every change of credentials on any instance invalidates
/// (`CredentialChanges`).
final class UserTokens: Sendable {
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var tid: String
        var exp: ExpirationClaim
        /// Absent from tokens issued before revocations existed: any revocation refuses them.
        var iat: IssuedAtClaim?

        func verify(using algorithm: some JWTAlgorithm) async throws {
            try self.exp.verifyNotExpired()
        }
    }

    /// A tenant's verifying keys, for one generation of its secret.
    private struct TenantKeys {
        let generation: Int
        let collection: JWTKeyCollection
    }

    private let store: ReceiptsStore
    /// Key collections by tenant. Only tenants that exist get one (`CredentialDirectory`), so
    /// guessed tenant ids cannot grow it.
    private let keys = NIOLockedValueBox([String: TenantKeys]())

    init(store: ReceiptsStore) {
        self.store = store
    }

    /// The `kid` of a generation's tokens.
    static func keyIdentifier(generation: Int) -> JWKIdentifier {
        JWKIdentifier(string: "g\(generation)")
    }

    /// Mints a token for `user` of `tenant`, valid for `ttl` seconds, with the current secret.
    func mint(tenant: String, user: String, ttl: Int) async throws -> (token: String, expiresAt: Date) {
        // `exp` in whole seconds, as the contract shows it; `iat` to the millisecond.
        let now = Date()
        let expiresAt = Date(timeIntervalSince1970: (now.timeIntervalSince1970 + Double(ttl)).rounded(.down))
        let issuedAt = Date(timeIntervalSince1970: (now.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        let claims = Claims(sub: .init(value: user), tid: tenant, exp: .init(value: expiresAt), iat: .init(value: issuedAt))
        guard let keys = try await self.keys(tenant: tenant) else { throw APIError.unauthorized() }
        let token = try await keys.collection.sign(claims, kid: Self.keyIdentifier(generation: keys.generation))
        return (token, expiresAt)
    }

    /// The tenant and user of a valid token; nil when it is malformed, tampered with,
    /// expired, revoked, signed with a retired secret, or names an unknown tenant.
    ///
    /// - Throws: when the database could not be asked for the tenant's key (the request is
    ///   then unavailable, not unauthorized).
    func verify(_ token: String) async throws -> (tenant: String, user: String)? {
        guard let unverified = try? await JWTKeyCollection().unverified(token, as: Claims.self),
            let keys = try await self.keys(tenant: unverified.tid),
            let claims = try? await keys.collection.verify(token, as: Claims.self)
        else { return nil }
        if let revokedBefore = try await self.store.credentials.tokensRevokedBefore(tenant: claims.tid, user: claims.sub.value) {
            guard let issuedAt = claims.iat?.value, issuedAt > revokedBefore else { return nil }
        }
        return (claims.tid, claims.sub.value)
    }

    /// The tenant's keys for the generation of its secret the directory shows; nil for an
    /// unknown tenant (known without a query of its own from the `CredentialDirectory`).
    private func keys(tenant: String) async throws -> TenantKeys? {
        guard let generation = try await self.store.credentials.secretGeneration(of: tenant) else { return nil }
        if let cached = self.keys.withLockedValue({ $0[tenant] }), cached.generation == generation { return cached }
        guard let secrets = try await self.store.tokenSecrets(tenant: tenant) else { return nil }
        let collection = JWTKeyCollection()
        // The current secret signs and is the default: a token without a kid, or naming a
        // generation that is no longer kept, is checked against it (and fails, unless the
        // current secret is the one of generation 0 that signed it).
        if let previous = secrets.previous {
            await collection.add(hmac: HMACKey(from: previous), digestAlgorithm: .sha256, kid: Self.keyIdentifier(generation: secrets.generation - 1))
        }
        await collection.add(hmac: HMACKey(from: secrets.current), digestAlgorithm: .sha256, kid: Self.keyIdentifier(generation: secrets.generation))
        if secrets.generation == 1, let previous = secrets.previous {
            // Tokens of generation 0 carry no kid: they verify with it while it is kept.
            await collection.add(hmac: HMACKey(from: previous), digestAlgorithm: .sha256)
        } else {
            await collection.add(hmac: HMACKey(from: secrets.current), digestAlgorithm: .sha256)
        }
        let keys = TenantKeys(generation: secrets.generation, collection: collection)
        self.keys.withLockedValue { $0[tenant] = keys }
        return keys
    }
}
