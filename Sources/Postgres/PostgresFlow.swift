/// Whose database work the current task does: the *flow* its pool leases wait in.
///
/// A pool gives what comes free to its flows fairly (`PostgresConnectionPool`): a service
/// with tenants names each request's flow after its tenant (`named(_:_:)`), so one tenant's
/// flood waits in its own line while another tenant's request is served. Work outside any
/// flow (background work) is the flow `background`.
///
/// Tasks created inside inherit it (task-local); work done for a flow by a task of its own
/// (a batch run) names it there.
public enum PostgresFlow {
    /// The current task's flow; nil outside one (then `background`).
    @TaskLocal public static var current: String?

    /// The flow of work that names none.
    public static let background = ""

    /// Runs `body` as work of `flow`.
    public static func named<Result>(
        _ flow: String,
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> Result
    ) async rethrows -> Result {
        try await Self.$current.withValue(flow, operation: body, isolation: isolation)
    }
}
