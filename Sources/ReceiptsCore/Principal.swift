/// Who is calling: a tenant's backend (tenant key) or one end user's device (user token).
public enum Principal: Sendable, Hashable {
    /// A tenant key: may act for any user of the tenant.
    case tenant(String)
    /// A user token: acts only as its own user.
    case user(tenant: String, user: String)

    public var tenantId: String {
        switch self {
        case .tenant(let tenant): tenant
        case .user(let tenant, _): tenant
        }
    }

    /// The user of a user token; nil for a tenant key.
    public var tokenUser: String? {
        if case .user(_, let user) = self { return user }
        return nil
    }
}
