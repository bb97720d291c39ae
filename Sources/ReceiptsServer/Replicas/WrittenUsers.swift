import NIOConcurrencyHelpers

/// The users a write request changed the receipts, messages or membership of, as its
/// controller names them (`ReceiptsRequestContext.noteWrite(about:)`): `ConsistencyMiddleware`
/// records the write's position for them in `RecentWrites` once it has answered.
///
/// A reference in the request's context, so that the middleware outside the handler sees what
/// the handler named; made only for write requests.
final class WrittenUsers: Sendable {
    /// Most users one request names (a chat's members when it is created): past it, the rest
    /// go without the courtesy of the window (a token still binds).
    static let limit = 100

    private let users = NIOLockedValueBox([String]())

    func note(_ user: String) {
        self.users.withLockedValue { users in
            if users.count < Self.limit, !users.contains(user) { users.append(user) }
        }
    }

    var noted: [String] { self.users.withLockedValue { $0 } }
}
