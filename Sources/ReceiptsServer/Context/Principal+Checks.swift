import ReceiptsCore

/// What a caller may do, answered with the contract's 403.
extension Principal {
    /// Checks that the caller may act as `user` (a user token only as itself).
    func requireActing(as user: String) throws {
        if let tokenUser, tokenUser != user {
            throw APIError.forbidden("a user token acts only as its own user")
        }
    }

    /// Checks that the caller holds the tenant key.
    func requireTenantKey(for action: String) throws {
        if self.tokenUser != nil {
            throw APIError.forbidden("\(action) needs the tenant key")
        }
    }
}
