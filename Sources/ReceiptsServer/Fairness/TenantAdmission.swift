/// A tenant's rate limit: a bucket of `burst` tokens refilled at `perSecond`.
struct RateLimit: Equatable, Sendable {
    /// Tokens added a second.
    var perSecond: Int
    /// The bucket's size: the most requests at once after a quiet spell.
    var burst: Int

    /// Where a tenant with a rate limit stands, for the `RateLimit` headers.
    struct Quota: Equatable, Sendable {
        var rate: RateLimit
        /// Whole tokens left.
        var remaining: Int
        /// Seconds until the bucket is full again.
        var fullIn: Int
    }
}

/// Why `TenantAdmission` refuses a request.
enum AdmissionRefusal: Equatable, Sendable {
    /// The tenant's bucket is empty.
    case rateLimited
    /// The tenant's requests in flight on this instance are at `tenantMaximum`.
    case queueFull
    /// The service is saturated and the tenant has its share in flight.
    case overShare
}

/// The decisions of `TenantAdmissionMiddleware`: whether a tenant's request may start its work
/// now, or is refused 429 `rate_limited` before anything of it is done, and what the answer
/// tells the client of its limit.
///
/// A value with no locks and no clocks: every event takes the time it happened (`now`, in
/// nanoseconds of a monotonic clock).
///
/// Three rules, in this order:
/// 1. **A tenant's own line is bounded**: at most `tenantMaximum` of its requests in flight
///    on this instance; one more is refused (`queueFull`).
/// 2. **Shares when the service is saturated**: while `saturation` requests or more of all
///    tenants are in flight, a tenant gets no more than its share of them (`saturation`
///    divided by the tenants with requests in flight): the heaviest tenants' newest requests
///    are refused (`overShare`), and a tenant within its share is never refused for the load
///    of others (so the total may pass `saturation` by the shares of light tenants).
/// 3. **Its rate**: a tenant with a limit (`RateLimit`: requests a second, and a burst) spends one
///    token a request from a bucket of `burst` tokens refilled at `perSecond`; with none left,
///    it is refused (`rateLimited`) until one is back.
/// A request refused by a rule spends nothing of the next.
///
/// Sharing the database between tenants is the pool's (`PostgresFlow`): this decides only
/// whether a request may begin.
///
/// What it remembers is bounded: a tenant with nothing in flight and a full bucket is
/// forgotten, and beyond `maximumTenants` remembered, tenants with nothing in flight are
/// forgotten whatever their bucket (forgiving what they spent).
struct TenantAdmission {
    struct Configuration: Sendable {
        /// Requests in flight on this instance beyond which the service is saturated.
        var saturation: Int
        /// The most requests of one tenant in flight on this instance.
        var tenantMaximum: Int
        /// The most tenants remembered with nothing in flight.
        var maximumTenants = 10_000
    }

    enum Decision: Equatable, Sendable {
        /// Start; `finish` when done. The quota after spending this request's token.
        case admitted(RateLimit.Quota?)
        /// Refused: retry after this many seconds (at least one).
        case refused(AdmissionRefusal, retryAfter: Int, RateLimit.Quota?)
    }

    private struct TenantState {
        var inFlight = 0
        var bucket: Bucket?
    }

    private struct Bucket {
        var rate: RateLimit
        var tokens: Double
        var updatedAt: Int64

        /// The bucket at `now`, refilled since it was last looked at, under `rate` (an
        /// operator may have changed it: what is left carries over, up to the new burst).
        mutating func refill(at now: Int64, rate: RateLimit) {
            let elapsed = Double(max(0, now - self.updatedAt)) / 1e9
            self.tokens = min(Double(rate.burst), self.tokens + elapsed * Double(self.rate.perSecond))
            self.rate = rate
            self.updatedAt = now
        }

        func isFull(at now: Int64) -> Bool {
            let elapsed = Double(max(0, now - self.updatedAt)) / 1e9
            return self.tokens + elapsed * Double(self.rate.perSecond) >= Double(self.rate.burst)
        }

        var quota: RateLimit.Quota {
            let missing = Double(self.rate.burst) - self.tokens
            let fullIn = missing <= 0 ? 0 : Int((missing / Double(self.rate.perSecond)).rounded(.up))
            return RateLimit.Quota(rate: self.rate, remaining: Int(self.tokens.rounded(.down)), fullIn: fullIn)
        }

        /// Seconds until one whole token is back.
        var secondsToNextToken: Int {
            max(1, Int(((1 - self.tokens) / Double(self.rate.perSecond)).rounded(.up)))
        }
    }

    let configuration: Configuration
    private var tenants: [String: TenantState] = [:]
    /// Requests in flight, all tenants.
    private(set) var inFlight = 0
    /// Tenants with requests in flight.
    private var busyTenants = 0

    init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    /// Requests of `tenant` in flight.
    func inFlight(of tenant: String) -> Int { self.tenants[tenant]?.inFlight ?? 0 }

    /// Whether a request of `tenant` under `rate` (nil: no rate limit) may start at `now`.
    mutating func admit(_ tenant: String, rate: RateLimit?, now: Int64) -> Decision {
        var state = self.tenants[tenant] ?? TenantState()
        if let rate {
            if state.bucket == nil { state.bucket = Bucket(rate: rate, tokens: Double(rate.burst), updatedAt: now) }
            state.bucket!.refill(at: now, rate: rate)
        } else {
            state.bucket = nil
        }
        defer { self.remember(tenant, state, now: now) }
        if state.inFlight >= self.configuration.tenantMaximum {
            return .refused(.queueFull, retryAfter: 1, state.bucket?.quota)
        }
        if self.inFlight >= self.configuration.saturation {
            let sharing = self.busyTenants + (state.inFlight == 0 ? 1 : 0)
            let share = max(1, self.configuration.saturation / sharing)
            if state.inFlight >= share { return .refused(.overShare, retryAfter: 1, state.bucket?.quota) }
        }
        if let bucket = state.bucket {
            guard bucket.tokens >= 1 else { return .refused(.rateLimited, retryAfter: bucket.secondsToNextToken, bucket.quota) }
            state.bucket!.tokens -= 1
        }
        if state.inFlight == 0 { self.busyTenants += 1 }
        state.inFlight += 1
        self.inFlight += 1
        return .admitted(state.bucket?.quota)
    }

    /// A request of `tenant` that was admitted has ended (answered, failed or cancelled).
    mutating func finish(_ tenant: String, now: Int64) {
        guard var state = self.tenants[tenant], state.inFlight > 0 else { return }
        state.inFlight -= 1
        self.inFlight -= 1
        if state.inFlight == 0 { self.busyTenants -= 1 }
        self.remember(tenant, state, now: now)
    }

    private mutating func remember(_ tenant: String, _ state: TenantState, now: Int64) {
        if state.inFlight == 0, state.bucket?.isFull(at: now) ?? true {
            self.tenants[tenant] = nil
            return
        }
        self.tenants[tenant] = state
        guard self.tenants.count > self.configuration.maximumTenants + self.busyTenants else { return }
        self.tenants = self.tenants.filter { $0.value.inFlight > 0 || !($0.value.bucket?.isFull(at: now) ?? true) }
        if self.tenants.count > self.configuration.maximumTenants + self.busyTenants {
            self.tenants = self.tenants.filter { $0.value.inFlight > 0 }
        }
    }
}
