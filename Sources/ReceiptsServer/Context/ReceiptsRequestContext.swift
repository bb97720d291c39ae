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

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
        self.principal = nil
        self.browserOrigin = nil
        self.heldStream = nil
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
