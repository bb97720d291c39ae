import Hummingbird
import NIOCore
import Postgres

/// Gives each request one deadline for all its database work, `RECEIPTS_DATABASE_TIMEOUT_SECONDS`
/// from its start (README, "Limits, timeouts and faults": 503 `unavailable` within it).
///
/// Every lease the request takes shares it (`PostgresDeadline`): the authentication's look-up,
/// the wait for a pooled connection and the request's statements end by the one deadline,
/// not by one timeout each, so a request that waited for the pool has only what is left for
/// its statements.
struct DatabaseDeadlineMiddleware<Context: RequestContext>: RouterMiddleware {
    let timeout: Duration

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await PostgresDeadline.within(TimeAmount(self.timeout)) {
            try await next(request, context)
        }
    }
}
