import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Postgres
import ReceiptsStore

/// Lets an authenticated request of the API start only within its tenant's bounds
/// (`TenantAdmission`): its own line of requests in flight, its share when the instance is
/// saturated, its rate limit. A request refused answers 429 `rate_limited` with
/// `Retry-After` before anything of it is done.
///
/// An admitted request's database work waits in its tenant's line of the pool
/// (`PostgresFlow`), so one tenant's flood never makes another's request wait behind all of it.
///
/// Answers to a tenant with a rate limit (its own, or the instance's default) carry the IETF
/// `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers):
/// `RateLimit-Policy: "tenant";q=<burst>;w=<seconds to fill the bucket>` and
/// `RateLimit: "tenant";r=<requests left>;t=<seconds until the bucket is full>`.
///
/// Streams are not counted here: they have caps of their own (`StreamLimiter`).
struct TenantAdmissionMiddleware: RouterMiddleware {
    typealias Context = ReceiptsRequestContext

    let admission: TenantAdmissionGate
    let metrics: ServiceMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let tenant = try context.requirePrincipal().tenantId
        let rate = try await self.admission.rate(of: tenant)
        let quota: TenantAdmission.Quota?
        switch self.admission.admit(tenant, rate: rate) {
        case .refused(let refusal, let retryAfter, let refusedQuota):
            self.metrics.recordRefusal(refusal)
            var headers = HTTPFields()
            headers[.retryAfter] = String(retryAfter)
            Self.add(refusedQuota, to: &headers)
            throw APIError(.tooManyRequests, .rateLimited, Self.message(for: refusal), headers: headers)
        case .admitted(let admittedQuota):
            quota = admittedQuota
        }
        defer { self.admission.finish(tenant) }
        do {
            var response = try await PostgresFlow.named(tenant) { try await next(request, context) }
            Self.add(quota, to: &response.headers)
            return response
        } catch var error as APIError {
            Self.add(quota, to: &error.headers)
            throw error
        }
    }

    static func message(for refusal: TenantAdmission.Refusal) -> String {
        switch refusal {
        case .queueFull: "too many requests of this tenant are in progress on this instance; retry after Retry-After seconds"
        case .overShare: "the service is busy and this tenant has its share of it in progress; retry after Retry-After seconds"
        case .rateLimited: "this tenant's rate limit is spent; retry after Retry-After seconds"
        }
    }

    static func add(_ quota: TenantAdmission.Quota?, to headers: inout HTTPFields) {
        guard let quota else { return }
        let window = max(1, (quota.rate.burst + quota.rate.perSecond - 1) / quota.rate.perSecond)
        headers[.rateLimitPolicy] = "\"tenant\";q=\(quota.rate.burst);w=\(window)"
        headers[.rateLimit] = "\"tenant\";r=\(quota.remaining);t=\(quota.fullIn)"
    }
}

extension HTTPField.Name {
    static let rateLimitPolicy = Self("RateLimit-Policy")!
    static let rateLimit = Self("RateLimit")!
}

/// The instance's `TenantAdmission` under a lock, with the tenants' limits it applies.
final class TenantAdmissionGate: Sendable {
    private let state: NIOLockedValueBox<TenantAdmission>
    private let directory: CredentialDirectory
    private let fairness: ReceiptsConfiguration.Fairness

    init(fairness: ReceiptsConfiguration.Fairness, directory: CredentialDirectory) {
        self.fairness = fairness
        self.directory = directory
        self.state = NIOLockedValueBox(
            TenantAdmission(.init(saturation: fairness.saturation, tenantMaximum: fairness.tenantMaximum)))
    }

    /// The rate limit in force for `tenant`: its own, else the instance's default; nil: none.
    func rate(of tenant: String) async throws -> TenantAdmission.Rate? {
        Self.rate(own: try await self.directory.limits(of: tenant), fairness: self.fairness)
    }

    /// A tenant's own limits over the instance's defaults, field by field; a burst that is
    /// set nowhere is one second's worth.
    static func rate(own: TenantLimits, fairness: ReceiptsConfiguration.Fairness) -> TenantAdmission.Rate? {
        guard let perSecond = own.requestsPerSecond ?? fairness.defaultRequestsPerSecond else { return nil }
        let burst = own.burst ?? (own.requestsPerSecond == nil ? fairness.defaultBurst : nil) ?? perSecond
        return TenantAdmission.Rate(perSecond: perSecond, burst: burst)
    }

    func admit(_ tenant: String, rate: TenantAdmission.Rate?) -> TenantAdmission.Decision {
        let now = Int64(NIODeadline.now().uptimeNanoseconds)
        return self.state.withLockedValue { $0.admit(tenant, rate: rate, now: now) }
    }

    func finish(_ tenant: String) {
        let now = Int64(NIODeadline.now().uptimeNanoseconds)
        self.state.withLockedValue { $0.finish(tenant, now: now) }
    }

    /// Requests of all tenants in flight.
    var inFlight: Int { self.state.withLockedValue { $0.inFlight } }
}
