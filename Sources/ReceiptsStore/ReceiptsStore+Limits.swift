import Postgres

/// A tenant's own rate limit, as stored; nil in a field: the instance's default.
public struct TenantLimits: Sendable, Equatable {
    /// Requests a second on each instance.
    public var requestsPerSecond: Int?
    /// The most requests at once after a quiet spell, on each instance.
    public var burst: Int?

    public init(requestsPerSecond: Int?, burst: Int?) {
        self.requestsPerSecond = requestsPerSecond
        self.burst = burst
    }

    /// No limit of its own.
    public static let instanceDefault = TenantLimits(requestsPerSecond: nil, burst: nil)
}

/// Tenants' rate limits (`GET`/`PUT /admin/v1/tenants/{tenantId}/limits`; docs/operations.md,
/// "Fairness and rate limits"). The service applies them through the `CredentialDirectory`,
/// which every instance reloads when they change (a trigger notifies, also for psql).
extension ReceiptsStore {
    /// The tenant's own limits, as stored; nil for an unknown tenant or one being erased.
    public func tenantLimits(tenant: String) async throws -> TenantLimits? {
        try await self.withTenant(tenant, readOnly: true) { connection in
            try await connection.query(
                "SELECT requests_per_second, burst FROM receipts.tenants WHERE tenant_id = \(tenant) AND erasing_since IS NULL"
            ).first.map { row in
                let (requestsPerSecond, burst) = try row.decode((Int?, Int?).self)
                return TenantLimits(requestsPerSecond: requestsPerSecond, burst: burst)
            }
        }
    }

    /// Sets the tenant's own limits (already validated); returns them as stored, nil for an
    /// unknown tenant or one being erased. This process's directory drops what it held at
    /// once, before the answer.
    public func setTenantLimits(tenant: String, _ limits: TenantLimits) async throws -> TenantLimits? {
        let rows = try await self.query(
            "SELECT requests_per_second, burst FROM receipts.set_tenant_limits(\(tenant), \(limits.requestsPerSecond)::int4, \(limits.burst)::int4)")
        guard let row = rows.first else { return nil }
        self.credentials.invalidate(tenant: tenant)
        let (requestsPerSecond, burst) = try row.decode((Int?, Int?).self)
        return TenantLimits(requestsPerSecond: requestsPerSecond, burst: burst)
    }
}
