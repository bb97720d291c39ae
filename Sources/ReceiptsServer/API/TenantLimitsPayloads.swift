/// `PUT /admin/v1/tenants/{tenantId}/limits` body: `{"requestsPerSecond","burst"}`, each a
/// whole number from 1 to 1,000,000, or `null` (or absent) for the instance's default.
struct TenantLimitsRequest: RequestBody {
    static let range = 1...1_000_000

    let requestsPerSecond: Int?
    let burst: Int?

    enum CodingKeys: String, CodingKey, CaseIterable { case requestsPerSecond, burst }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.requestsPerSecond = try container.decodeIfPresent(Int.self, forKey: .requestsPerSecond)
        self.burst = try container.decodeIfPresent(Int.self, forKey: .burst)
    }

    /// Throws 400 for a number out of `range`.
    func validate() throws {
        for (name, value) in [("requestsPerSecond", self.requestsPerSecond), ("burst", self.burst)] {
            if let value, !Self.range.contains(value) {
                throw APIError.invalidRequest(
                    "\(name) must be from \(Self.range.lowerBound) to \(Self.range.upperBound), or null for the default; not \(value)")
            }
        }
    }
}

/// `GET` and `PUT /admin/v1/tenants/{tenantId}/limits` answer: the limit in force on each
/// instance (`null`: none), and whether it is the instance's default or the tenant's own.
struct TenantLimitsResponse: JSONResponse {
    let tenantId: String
    let requestsPerSecond: Int?
    let burst: Int?
    /// `tenant` when the tenant has a limit of its own, else `default`.
    let source: String
}
