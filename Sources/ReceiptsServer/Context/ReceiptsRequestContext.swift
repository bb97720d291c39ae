import Foundation
import Hummingbird
import NIOCore
import ReceiptsCore
import ReceiptsJSON

/// The request context of every route: Hummingbird's core storage plus the authenticated
/// caller, filled in by `AuthenticationMiddleware`.
public struct ReceiptsRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The caller of a `/v1` route (nil before authentication and on public routes).
    public var principal: Principal?
    /// The origin of a browser's request (`Origin`) and whether it is allowed, set by
    /// `CrossOriginMiddleware`; nil for requests without `Origin`.
    var browserOrigin: BrowserOrigin?
    /// The connection (an event stream's events are written to it directly: `LiveSink`).
    let channel: any Channel
    /// Set when NIO handlers will hold the connection's event stream (`EventSourceHandler`):
    /// `GET /v1/events` leaves the stream here and answers only its head.
    var heldStream: AcceptedStream?
    /// The `Receipts-Consistency-Token` the request sent, if any (`ConsistencyMiddleware`).
    var consistencyToken: ConsistencyToken?
    /// For a write request: the users it is about (`noteWrite(about:)`).
    var writtenUsers: WrittenUsers?

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
        self.principal = nil
        self.browserOrigin = nil
        self.heldStream = nil
        self.consistencyToken = nil
        self.writtenUsers = nil
    }

    /// Names a user this write is about, so that reads about them through this instance show
    /// it for a while even without a token (`RecentWrites`).
    func noteWrite(about user: String) {
        self.writtenUsers?.note(user)
    }

    /// Bodies over 1 MiB are refused with 413 (the OpenAPI document, `info`).
    public var maxUploadSize: Int { BodyLimitMiddleware<Self>.maximumBytes }

    public var requestDecoder: RequestJSONDecoder { RequestJSONDecoder() }
    public var responseEncoder: JSONEncoder { JSONCoding.makeEncoder() }

    /// The authenticated caller; routes behind `AuthenticationMiddleware` always have one.
    func requirePrincipal() throws -> Principal {
        guard let principal else { throw APIError.unauthorized() }
        return principal
    }
}
