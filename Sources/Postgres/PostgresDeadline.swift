import NIOCore

/// The moment by which the database work of the current task must be done.
///
/// An HTTP request sets it once, where it begins (`within(_:_:)`), so that every lease it
/// takes shares it: the wait for a pooled connection and every call on it, through an
/// authentication's look-up and the request's own transactions, end by one deadline instead
/// of one per step. A lease taken outside such a scope (background work) waits for a
/// connection at most the pool's `leaseTimeout`, and its statements are bounded one by one
/// (see `PostgresConnectionPool`).
///
/// Tasks created inside the scope inherit it (task-local), which is right for work done on
/// the request's behalf and wrong for work that outlives it: such work calls `without(_:)`.
public enum PostgresDeadline {
    /// The current task's deadline; nil outside a scope.
    @TaskLocal public static var current: NIODeadline?

    /// Runs `body` with a deadline `timeout` from now, or the current one if that is sooner.
    public static func within<Result>(
        _ timeout: TimeAmount,
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> Result
    ) async rethrows -> Result {
        var deadline = NIODeadline.now() + timeout
        if let current, current < deadline { deadline = current }
        return try await Self.$current.withValue(deadline, operation: body, isolation: isolation)
    }

    /// Runs `body` outside any deadline scope: for work that may outlast the request that
    /// started it (a batch run that goes on serving later requests).
    public static func without<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> Result
    ) async rethrows -> Result {
        try await Self.$current.withValue(nil, operation: body, isolation: isolation)
    }
}
