import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Postgres
import ReceiptsCore
import ReceiptsStore

/// Lets an authenticated request of the API begin only within its tenant's bounds
/// (`TenantAdmission`): a request refused (its tenant's line full, the instance saturated and
/// the tenant over its share, its rate limit spent) answers 429 `rate_limited` with
/// `Retry-After` before anything of it is done.
///
/// An admitted request's database work waits in its tenant's line of the pool and holds no
/// more than the tenant's share of it while other tenants are active (`PostgresFlow`), so one
/// tenant's flood never makes another's request wait behind all of it.
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
        let quota: RateLimit.Quota?
        do {
            quota = try await self.admission.enter(tenant)
        } catch let refused as TenantAdmissionGate.Refused {
            self.metrics.recordRefusal(refused.refusal)
            var headers = HTTPFields()
            headers[.retryAfter] = String(refused.retryAfter)
            Self.add(refused.quota, to: &headers)
            throw APIError(.tooManyRequests, .rateLimited, Self.message(for: refused.refusal), headers: headers)
        }
        defer { self.admission.leave(tenant) }
        do {
            var response = try await PostgresFlow.named(tenant) { try await next(request, context) }
            Self.add(quota, to: &response.headers)
            return response
        } catch {
            // Every answer to a limited tenant carries its fields, errors too: the contract's
            // error here, as `ErrorMiddleware` would make it.
            var answer = ErrorMiddleware<Context>.apiError(for: error, logger: context.logger)
            Self.add(quota, to: &answer.headers)
            throw answer
        }
    }

    static func message(for refusal: AdmissionRefusal) -> String {
        switch refusal {
        case .rateLimited: "this tenant's rate limit is spent; retry after Retry-After seconds"
        case .queueFull: "too many requests of this tenant are in progress on this instance; retry after Retry-After seconds"
        case .overShare: "the service is busy and this tenant has its share of it in progress; retry after Retry-After seconds"
        }
    }

    static func add(_ quota: RateLimit.Quota?, to headers: inout HTTPFields) {
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
    /// A request refused before anything of it was done.
    struct Refused: Error {
        let refusal: AdmissionRefusal
        let retryAfter: Int
        let quota: RateLimit.Quota?
    }

    private let state: NIOLockedValueBox<TenantAdmission>
    private let directory: CredentialDirectory
    private let fairness: ReceiptsConfiguration.Fairness

    init(fairness: ReceiptsConfiguration.Fairness, directory: CredentialDirectory) {
        self.fairness = fairness
        self.directory = directory
        self.state = NIOLockedValueBox(TenantAdmission(.init(saturation: fairness.saturation, tenantMaximum: fairness.tenantMaximum)))
    }

    /// The rate limit in force for `tenant`: its own, else the instance's default; nil: none.
    func rate(of tenant: String) async throws -> RateLimit? {
        Self.rate(own: try await self.directory.limits(of: tenant), fairness: self.fairness)
    }

    /// A tenant's own limits over the instance's defaults, field by field; a burst that is
    /// set nowhere is one second's worth.
    static func rate(own: TenantLimits, fairness: ReceiptsConfiguration.Fairness) -> RateLimit? {
        guard let perSecond = own.requestsPerSecond ?? fairness.defaultRequestsPerSecond else { return nil }
        let burst = own.burst ?? (own.requestsPerSecond == nil ? fairness.defaultBurst : nil) ?? perSecond
        return RateLimit(perSecond: perSecond, burst: burst)
    }

    /// Lets a request of `tenant` begin (then `leave` when it ends), with the tenant's quota;
    /// throws `Refused` when it may not.
    func enter(_ tenant: String) async throws -> RateLimit.Quota? {
        let rate = try await self.rate(of: tenant)
        let now = Self.now
        switch self.state.withLockedValue({ $0.admit(tenant, rate: rate, now: now) }) {
        case .admitted(let quota):
            return quota
        case .refused(let refusal, let retryAfter, let quota):
            throw Refused(refusal: refusal, retryAfter: retryAfter, quota: quota)
        }
    }

    /// A request let in by `enter` has ended.
    func leave(_ tenant: String) {
        let now = Self.now
        self.state.withLockedValue { $0.finish(tenant, now: now) }
    }

    /// Requests of all tenants in flight.
    var inFlight: Int { self.state.withLockedValue { $0.inFlight } }

    private static var now: Int64 { Int64(NIODeadline.now().uptimeNanoseconds) }
}
