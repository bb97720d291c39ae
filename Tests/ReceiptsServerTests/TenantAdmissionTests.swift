import Testing

@testable import ReceiptsServer

/// Per-tenant admission (`TenantAdmission`), driven by hand: `now` is given in nanoseconds.
@Suite("Tenant admission")
struct TenantAdmissionTests {
    static let second: Int64 = 1_000_000_000

    /// The admission in a box, so that its events read as calls in `#expect`.
    final class Admission {
        var admission: TenantAdmission

        init(saturation: Int = 1_000, tenantMaximum: Int = 1_000, maximumTenants: Int = 10_000) {
            self.admission = TenantAdmission(.init(saturation: saturation, tenantMaximum: tenantMaximum, maximumTenants: maximumTenants))
        }

        func admit(_ tenant: String, rate: RateLimit? = nil, now: Int64 = 0) -> TenantAdmission.Decision {
            self.admission.admit(tenant, rate: rate, now: now)
        }

        /// Admits `count` requests of `tenant`: whether every one was.
        func admitAll(_ tenant: String, _ count: Int, rate: RateLimit? = nil, now: Int64 = 0) -> Bool {
            (0..<count).allSatisfy { _ in
                if case .admitted = self.admit(tenant, rate: rate, now: now) { return true }
                return false
            }
        }

        func finish(_ tenant: String, now: Int64 = 0) { self.admission.finish(tenant, now: now) }
        var inFlight: Int { self.admission.inFlight }
        func inFlight(of tenant: String) -> Int { self.admission.inFlight(of: tenant) }
    }

    /// The refusal of `decision`, nil when it admits.
    static func refusal(_ decision: TenantAdmission.Decision) -> AdmissionRefusal? {
        if case .refused(let refusal, _, _) = decision { return refusal }
        return nil
    }

    /// The quota `decision` reports.
    static func quota(_ decision: TenantAdmission.Decision) -> RateLimit.Quota? {
        switch decision {
        case .admitted(let quota): quota
        case .refused(_, _, let quota): quota
        }
    }

    // MARK: - A tenant's own line

    @Test("a tenant's requests in flight are bounded by tenantMaximum: one more is refused queueFull, and admitted again once one finishes")
    func queueFull() {
        let admission = Admission(tenantMaximum: 2)
        #expect(admission.admit("a") == .admitted(nil))
        #expect(admission.admit("a") == .admitted(nil))
        #expect(admission.admit("a") == .refused(.queueFull, retryAfter: 1, nil))
        #expect(admission.inFlight(of: "a") == 2)
        #expect(admission.inFlight == 2)
        // Another tenant has its own line.
        #expect(admission.admit("b") == .admitted(nil))
        admission.finish("a")
        #expect(admission.inFlight(of: "a") == 1)
        #expect(admission.admit("a") == .admitted(nil))
        #expect(admission.admit("a") == .refused(.queueFull, retryAfter: 1, nil))
        #expect(admission.inFlight == 3)
    }

    @Test("finishing what was never admitted changes nothing")
    func finishUnknown() {
        let admission = Admission(tenantMaximum: 1)
        admission.finish("a")
        #expect(admission.inFlight == 0)
        #expect(admission.admit("a") == .admitted(nil))
        admission.finish("a")
        admission.finish("a")
        #expect(admission.inFlight == 0)
        #expect(admission.admit("a") == .admitted(nil))
    }

    // MARK: - Shares

    @Test("below saturation no tenant is refused for its share")
    func noShareBelowSaturation() {
        let admission = Admission(saturation: 4, tenantMaximum: 10)
        #expect(admission.admitAll("a", 4))
        #expect(admission.inFlight == 4)
        admission.finish("a")
        // Below saturation again: a may take its fourth place back.
        #expect(admission.admit("a") == .admitted(nil))
    }

    @Test("when saturated, a tenant at or over its share is refused overShare, while one within its share is admitted, so the total may pass saturation")
    func overShare() {
        let admission = Admission(saturation: 4, tenantMaximum: 10)
        #expect(admission.admitAll("a", 4))
        // a alone: its share is all 4.
        #expect(admission.admit("a") == .refused(.overShare, retryAfter: 1, nil))
        // b's share is 4 / 2.
        #expect(admission.admitAll("b", 2))
        #expect(admission.inFlight == 6)
        #expect(Self.refusal(admission.admit("b")) == .overShare)
        #expect(Self.refusal(admission.admit("a")) == .overShare)
        // c's share is 4 / 3.
        #expect(admission.admit("c") == .admitted(nil))
        #expect(Self.refusal(admission.admit("c")) == .overShare)
        #expect(admission.inFlight == 7)
        #expect(admission.inFlight(of: "a") == 4)
        #expect(admission.inFlight(of: "b") == 2)
        #expect(admission.inFlight(of: "c") == 1)
        // Refusals count nothing in flight; once below saturation, a is admitted again.
        for _ in 0..<4 { admission.finish("a") }
        #expect(admission.inFlight == 3)
        #expect(admission.admit("a") == .admitted(nil))
    }

    // MARK: - Rates

    @Test("a rate-limited tenant spends its burst at once, is then refused rateLimited with retryAfter of at least a second and no tokens left, and is admitted again once a token is back")
    func rateLimited() {
        let admission = Admission()
        let rate = RateLimit(perSecond: 2, burst: 3)
        #expect(admission.admit("a", rate: rate) == .admitted(.init(rate: rate, remaining: 2, fullIn: 1)))
        #expect(admission.admit("a", rate: rate) == .admitted(.init(rate: rate, remaining: 1, fullIn: 1)))
        #expect(admission.admit("a", rate: rate) == .admitted(.init(rate: rate, remaining: 0, fullIn: 2)))
        let refused = admission.admit("a", rate: rate)
        guard case .refused(.rateLimited, let retryAfter, let quota?) = refused else {
            Issue.record("not refused rateLimited with a quota: \(refused)")
            return
        }
        #expect(retryAfter >= 1)
        #expect(quota.remaining == 0)
        #expect(quota.rate == rate)
        #expect(quota.fullIn == 2)
        // 0.4 s: 0.8 of a token.
        #expect(Self.refusal(admission.admit("a", rate: rate, now: 4 * Self.second / 10)) == .rateLimited)
        // 0.6 s: 1.2 tokens, one spent.
        #expect(admission.admit("a", rate: rate, now: 6 * Self.second / 10) == .admitted(.init(rate: rate, remaining: 0, fullIn: 2)))
        #expect(Self.refusal(admission.admit("a", rate: rate, now: 6 * Self.second / 10)) == .rateLimited)
        // 10 s later: the bucket is full, never fuller than burst.
        #expect(Self.quota(admission.admit("a", rate: rate, now: 10 * Self.second))?.remaining == 2)
        #expect(admission.inFlight(of: "a") == 5)
    }

    @Test("a refused request spends no token and counts nothing in flight")
    func refusalSpendsNothing() {
        // Refused queueFull: its token is still there.
        let line = Admission(tenantMaximum: 1)
        let rate = RateLimit(perSecond: 1, burst: 2)
        #expect(Self.quota(line.admit("a", rate: rate))?.remaining == 1)
        #expect(line.admit("a", rate: rate) == .refused(.queueFull, retryAfter: 1, .init(rate: rate, remaining: 1, fullIn: 1)))
        #expect(line.inFlight(of: "a") == 1)
        line.finish("a")
        #expect(line.admit("a", rate: rate) == .admitted(.init(rate: rate, remaining: 0, fullIn: 2)))
        line.finish("a")
        // Refused rateLimited: nothing in flight.
        #expect(Self.refusal(line.admit("a", rate: rate)) == .rateLimited)
        #expect(line.inFlight(of: "a") == 0)
        #expect(line.inFlight == 0)

        // Refused overShare: its token is still there.
        let shares = Admission(saturation: 1, tenantMaximum: 10)
        let roomy = RateLimit(perSecond: 1, burst: 5)
        #expect(shares.admit("b") == .admitted(nil))
        #expect(Self.quota(shares.admit("a", rate: roomy))?.remaining == 4)
        #expect(Self.refusal(shares.admit("a", rate: roomy)) == .overShare)
        #expect(Self.refusal(shares.admit("a", rate: roomy)) == .overShare)
        #expect(shares.inFlight == 2)
        shares.finish("a")
        #expect(Self.quota(shares.admit("a", rate: roomy))?.remaining == 3)
    }

    @Test("a tenant at tenantMaximum with an empty bucket is refused queueFull: its own line comes first")
    func ruleOrder() {
        let admission = Admission(tenantMaximum: 1)
        let rate = RateLimit(perSecond: 1, burst: 1)
        #expect(Self.quota(admission.admit("a", rate: rate))?.remaining == 0)
        #expect(Self.refusal(admission.admit("a", rate: rate)) == .queueFull)
    }

    @Test("a changed rate carries the tokens left over, up to the new burst")
    func rateChangeCarriesTokens() {
        let admission = Admission()
        let wide = RateLimit(perSecond: 1, burst: 10)
        #expect(Self.quota(admission.admit("a", rate: wide))?.remaining == 9)
        #expect(Self.quota(admission.admit("a", rate: wide))?.remaining == 8)
        // Lowered to a burst of 5: 8 left is cut to 5, then one spent.
        let narrow = RateLimit(perSecond: 1, burst: 5)
        let lowered = Self.quota(admission.admit("a", rate: narrow))
        #expect(lowered?.remaining == 4)
        #expect(lowered?.rate == narrow)
        // Raised to a burst of 20: what was left carries over, the bucket is not refilled.
        let wider = RateLimit(perSecond: 1, burst: 20)
        let raised = Self.quota(admission.admit("a", rate: wider))
        #expect(raised?.remaining == 3)
        #expect(raised?.rate == wider)
        #expect(raised?.fullIn == 17)
    }

    @Test("a tenant without a rate limit gets no quota, refused or admitted")
    func noRateNoQuota() {
        let admission = Admission(tenantMaximum: 1)
        #expect(admission.admit("a", rate: nil) == .admitted(nil))
        #expect(admission.admit("a", rate: nil) == .refused(.queueFull, retryAfter: 1, nil))
        admission.finish("a")
        // A limit removed: no quota any more.
        #expect(Self.quota(admission.admit("b", rate: RateLimit(perSecond: 1, burst: 3))) != nil)
        admission.finish("b")
        #expect(admission.admit("b", rate: nil) == .admitted(nil))
    }

    // MARK: - Memory

    @Test("what it remembers is bounded: many tenants passing leave it working, forgetting idle tenants' buckets but never a tenant with requests in flight")
    func boundedMemory() {
        let admission = Admission(saturation: 100_000, tenantMaximum: 1, maximumTenants: 3)
        let rate = RateLimit(perSecond: 1, burst: 1)
        #expect(admission.admit("busy", rate: rate) == .admitted(.init(rate: rate, remaining: 0, fullIn: 1)))
        #expect(admission.admit("spent", rate: rate) == .admitted(.init(rate: rate, remaining: 0, fullIn: 1)))
        admission.finish("spent")
        #expect(Self.refusal(admission.admit("spent", rate: rate)) == .rateLimited)
        for index in 0..<1_000 {
            let tenant = "t\(index)"
            #expect(admission.admit(tenant, rate: rate) == .admitted(.init(rate: rate, remaining: 0, fullIn: 1)))
            #expect(Self.refusal(admission.admit(tenant, rate: rate)) == .queueFull)
            admission.finish(tenant)
        }
        #expect(admission.inFlight == 1)
        // The tenant in flight is remembered: its line is still full.
        #expect(admission.inFlight(of: "busy") == 1)
        #expect(Self.refusal(admission.admit("busy", rate: rate)) == .queueFull)
        admission.finish("busy")
        #expect(admission.inFlight == 0)
        // An idle tenant's empty bucket was forgotten among so many (what it spent forgiven).
        #expect(admission.admit("spent", rate: rate) == .admitted(.init(rate: rate, remaining: 0, fullIn: 1)))
        // And the rules still hold for the next tenant.
        #expect(Self.quota(admission.admit("next", rate: rate))?.remaining == 0)
        admission.finish("next")
        #expect(Self.refusal(admission.admit("next", rate: rate)) == .rateLimited)
    }
}
