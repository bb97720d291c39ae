import Hummingbird
import Logging
import ReceiptsStore

/// `/admin/v1/tenants/{tenantId}/limits`: a tenant's rate limit, behind the admin token
/// (docs/operations.md, "Fairness and rate limits"). Every instance applies a change within
/// about a second; the same columns can be set from psql.
struct TenantLimitsController {
    let store: ReceiptsStore
    let fairness: ReceiptsConfiguration.Fairness

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.get("tenants/:tenantId/limits", use: self.get)
        group.put("tenants/:tenantId/limits", use: self.put)
    }

    @Sendable func get(_ request: Request, context: ReceiptsRequestContext) async throws -> TenantLimitsResponse {
        let tenant = try Validation.pathId("tenantId", in: context)
        guard let limits = try await self.store.tenantLimits(tenant: tenant) else { throw APIError.notFound("no such tenant") }
        return self.response(tenant, limits)
    }

    @Sendable func put(_ request: Request, context: ReceiptsRequestContext) async throws -> TenantLimitsResponse {
        let tenant = try Validation.pathId("tenantId", in: context)
        let body = try await request.decode(as: TenantLimitsRequest.self, context: context)
        try body.validate()
        let wanted = TenantLimits(requestsPerSecond: body.requestsPerSecond, burst: body.burst)
        guard let stored = try await self.store.setTenantLimits(tenant: tenant, wanted) else { throw APIError.notFound("no such tenant") }
        self.store.logger.info(
            "tenant rate limit set",
            metadata: [
                "receipts.tenant_id": "\(tenant)", "receipts.requests_per_second": "\(stored.requestsPerSecond.map(String.init) ?? "default")",
                "receipts.burst": "\(stored.burst.map(String.init) ?? "default")", "receipts.by": "admin",
            ])
        return self.response(tenant, stored)
    }

    private func response(_ tenant: String, _ own: TenantLimits) -> TenantLimitsResponse {
        let rate = TenantAdmissionGate.rate(own: own, fairness: self.fairness)
        return TenantLimitsResponse(
            tenantId: tenant, requestsPerSecond: rate?.perSecond, burst: rate?.burst,
            source: own == .instanceDefault ? "default" : "tenant")
    }
}
