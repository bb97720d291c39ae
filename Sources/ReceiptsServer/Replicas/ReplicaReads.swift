import Hummingbird
import Postgres
import ReceiptsCore
import ReceiptsStore

/// Where the four reads a standby may serve go (unread counts, a chat, a page of messages,
/// one message): to `StandbyReads` when standbys are configured, no older than the request's
/// consistency token or the user's own recent write; to the primary otherwise.
struct ReplicaReads: Sendable {
    let store: ReceiptsStore
    let standbys: StandbyReads?
    /// Users' own recent writes; nil without standbys (every read is on the primary then).
    let recentWrites: RecentWrites?
    let metrics: ServiceMetrics

    /// Runs `read` on the server that may answer it; `user` is the user the read is about (the
    /// path's `userId`, or the viewer), whose own recent writes it must show.
    func serve<Result>(
        _ context: ReceiptsRequestContext,
        about user: String?,
        _ read: (ReceiptsStore) async throws -> Result
    ) async throws -> ReadAnswer<Result> {
        guard let standbys else {
            self.metrics.recordRead(from: .primary, waited: false)
            return ReadAnswer(value: try await read(self.store), source: .primary)
        }
        var position = context.consistencyToken?.position
        if let user, let tenant = context.principal?.tenantId, let own = self.recentWrites?.position(tenant: tenant, user: user) {
            position = max(own, position ?? own)
        }
        let (value, route) = try await standbys.read(atLeast: position) { standby in
            try await read(standby.map { self.store.reading(from: $0) } ?? self.store)
        }
        self.metrics.recordRead(from: route.source, waited: route.waited)
        return ReadAnswer(value: value, source: route.source)
    }
}

/// A read's value and the server it came from.
struct ReadAnswer<Value> {
    let value: Value
    let source: ReadSource
}

/// An answer with `Receipts-Read-Source`.
struct SourcedResponse<Body: ResponseGenerator>: ResponseGenerator {
    let body: Body
    let source: ReadSource

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try self.body.response(from: request, context: context)
        response.headers[ConsistencyToken.readSourceHeaderName] = self.source.rawValue
        return response
    }
}
