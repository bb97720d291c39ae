import HTTPTypes
import NIOConcurrencyHelpers
import ReceiptsCore

/// Counts the open streams (WebSocket and SSE together) of each user and each tenant on this
/// instance, and refuses one more than the caps of README, "Limits, timeouts and faults":
/// `RECEIPTS_MAX_STREAMS_PER_USER` per user, `RECEIPTS_MAX_STREAMS_PER_TENANT` per tenant
/// (its key's streams and its users' together).
///
/// A stream holds a `StreamPermit` from before its handshake response to its end. The permit
/// gives its place back when it is released, and at the latest when it is freed: a stream
/// that ends in any way (the client leaves, an error, an upgrade that never completes, a
/// response body that is never written) cannot leak a place.
package final class StreamLimiter: Sendable {
    let maximumPerUser: Int
    let maximumPerTenant: Int

    private struct Counts {
        var tenants: [String: Int] = [:]
        var users: [UserKey: Int] = [:]
    }

    private struct UserKey: Hashable {
        let tenant: String
        let user: String
    }

    private let counts = NIOLockedValueBox(Counts())

    package init(maximumPerUser: Int, maximumPerTenant: Int) {
        self.maximumPerUser = maximumPerUser
        self.maximumPerTenant = maximumPerTenant
    }

    /// Takes a place for one more stream of `principal`.
    ///
    /// A stream refused because its user or tenant has its most streams open; the HTTP edge
    /// answers it 429 `rate_limited` (the server's `ErrorMiddleware`).
    package struct Refusal: Error {
        /// Which cap was reached, for the client.
        package let message: String
    }

    /// - Throws: `Refusal` when the user or the tenant already has its most streams open.
    package func admit(_ principal: Principal) throws(Refusal) -> StreamPermit {
        let tenant = principal.tenantId
        let user = principal.tokenUser.map { UserKey(tenant: tenant, user: $0) }
        let refusal = self.counts.withLockedValue { counts -> String? in
            if let user, counts.users[user, default: 0] >= self.maximumPerUser {
                return "this user has \(self.maximumPerUser) streams open, the most allowed; close one first"
            }
            if counts.tenants[tenant, default: 0] >= self.maximumPerTenant {
                return "this tenant has \(self.maximumPerTenant) streams open, the most allowed; close one first"
            }
            counts.tenants[tenant, default: 0] += 1
            if let user { counts.users[user, default: 0] += 1 }
            return nil
        }
        if let refusal { throw Refusal(message: refusal) }
        return StreamPermit { [weak self] in self?.release(tenant: tenant, user: user) }
    }

    private func release(tenant: String, user: UserKey?) {
        self.counts.withLockedValue { counts in
            if let count = counts.tenants[tenant] { counts.tenants[tenant] = count > 1 ? count - 1 : nil }
            if let user, let count = counts.users[user] { counts.users[user] = count > 1 ? count - 1 : nil }
        }
    }

    /// The open streams of the tenant with the most, as a share of `maximumPerTenant` (0 to 1):
    /// how near the busiest tenant is to its cap (`receipts_streams_busiest_tenant_ratio`).
    /// Walks the tenants with streams open, so for a scrape, not for a request.
    package var busiestTenantShare: Double {
        let most = self.counts.withLockedValue { $0.tenants.values.max() ?? 0 }
        return Double(most) / Double(max(1, self.maximumPerTenant))
    }

    /// The open streams of a tenant (for tests).
    func openStreams(tenant: String) -> Int {
        self.counts.withLockedValue { $0.tenants[tenant, default: 0] }
    }
}

/// One stream's place in the `StreamLimiter`: given back once, by `release()` or when freed.
package final class StreamPermit: Sendable {
    private let giveBack: NIOLockedValueBox<(@Sendable () -> Void)?>

    init(giveBack: @escaping @Sendable () -> Void) {
        self.giveBack = NIOLockedValueBox(giveBack)
    }

    /// Gives the place back now (later calls do nothing).
    package func release() {
        let giveBack = self.giveBack.withLockedValue { giveBack in
            defer { giveBack = nil }
            return giveBack
        }
        giveBack?()
    }

    deinit {
        self.release()
    }
}
