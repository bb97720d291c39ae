import Hummingbird
import Logging
import Postgres
import ReceiptsCore
import ReceiptsStore

/// Read-your-writes at the HTTP edge (DESIGN, "Read replicas"):
/// - a request's `Receipts-Consistency-Token` is parsed into its context (malformed: 400
///   `invalid_request`, before anything is done);
/// - a write's 2xx answer gets the primary's log position read after it committed, as its
///   token (`CommitPositionSlot`: read by the store on the write's connection; else
///   `PositionProbe`), and that position is kept for the users the write was about
///   (`RecentWrites`).
///
/// A committed write whose position cannot be read (the primary went away right after) is
/// answered without a token rather than with an error: what it did stays done.
struct ConsistencyMiddleware: RouterMiddleware {
    typealias Context = ReceiptsRequestContext

    let positions: PositionProbe
    /// Where users' own writes are kept for reads without a token; nil without standbys.
    let recentWrites: RecentWrites?
    let metrics: ServiceMetrics
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let sent = request.headers[ConsistencyToken.headerName] {
            guard let token = ConsistencyToken(sent) else {
                throw APIError.invalidRequest("Receipts-Consistency-Token is not a token this service gave")
            }
            context.consistencyToken = token
        }
        guard Self.writes(request.method) else { return try await next(request, context) }
        // The users a write is about matter only to the window kept for standbys' reads.
        let written = self.recentWrites == nil ? nil : WrittenUsers()
        context.writtenUsers = written
        let slot = CommitPositionSlot()
        var response = try await CommitPositionSlot.$current.withValue(slot) { [context] in
            try await next(request, context)
        }
        guard (200..<300).contains(response.status.code) else { return response }
        do {
            // Read by the store on the write's own connection, else (a write that did not
            // tell, or changed nothing) asked of the primary now.
            let position: WALPosition
            if let recorded = slot.position {
                position = recorded
            } else {
                position = try await self.positions.positionAfterNow()
            }
            response.headers[ConsistencyToken.headerName] = ConsistencyToken(position).description
            if let recentWrites, let written, let tenant = context.principal?.tenantId {
                var users = written.noted
                if let own = context.principal?.tokenUser { users.append(own) }
                recentWrites.record(position, tenant: tenant, users: users)
            }
        } catch {
            self.metrics.recordUntokenedWrite()
            self.logger.warning("a write's consistency token could not be read; answered without it", metadata: ["error": "\(error)"])
        }
        return response
    }

    private static func writes(_ method: HTTPRequest.Method) -> Bool {
        switch method {
        case .post, .put, .patch, .delete: true
        default: false
        }
    }
}
