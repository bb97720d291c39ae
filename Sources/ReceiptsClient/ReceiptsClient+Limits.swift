// The face, continued: a tenant's rate limit (docs/api.md, "Fairness and rate limits").

extension ReceiptsClient {
    public typealias TenantLimits = Components.Schemas.TenantLimits

    /// The rate limit in force for a tenant on each instance (admin token): its own, or the
    /// instance's default (`source`); `requestsPerSecond` and `burst` nil: no rate limit.
    public func limits(of tenantID: String) async throws -> TenantLimits {
        try await Self.call { try await generated.getTenantLimits(path: .init(tenantId: tenantID)) }.ok.body.json
    }

    /// Sets a tenant's own rate limit (admin token), replacing the one it had: a bucket of
    /// `burst` requests refilled at `requestsPerSecond` (each 1–1,000,000), on each instance.
    /// nil takes the instance's default for that member (both nil: back to the defaults).
    /// Returns the limit now in force; every instance applies it within about a second.
    @discardableResult
    public func setLimits(of tenantID: String, requestsPerSecond: Int?, burst: Int? = nil) async throws -> TenantLimits {
        try await Self.call {
            try await generated.putTenantLimits(
                path: .init(tenantId: tenantID), body: .json(.init(requestsPerSecond: requestsPerSecond, burst: burst)))
        }.ok.body.json
    }
}
