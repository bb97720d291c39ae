import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ReceiptsCore
import ReceiptsLive

/// `GET /v1/events`: the event stream as Server-Sent Events.
///
/// Each event is `id: <id>` and `data: <json>`; `Last-Event-ID` resumes after that id; a
/// comment line every 15 seconds keeps proxies from closing an idle stream. The stream takes
/// its place under the stream caps before the headers (429 beyond them), and ends with a
/// `: closed: <reason>` comment when the hub closes it, the server shuts down, or its
/// credential stops being valid (`StreamCredential`). A client that leaves is noticed when
/// its side of the connection closes, which gives its place under the caps back at once, not
/// at the next write (an event, or the heartbeat up to 15 s later).
///
/// A stream that is its connection's first request (as a browser's `EventSource` and most
/// clients open it) is held by NIO handlers once the route has answered its head
/// (`EventSourceHandler`, with no task while it is live); one that follows other requests on
/// a kept-alive connection is written by its request's task.
struct EventStreamController {
    static let heartbeatInterval = TimeAmount.seconds(15)

    let hub: EventHub
    let guards: StreamGuards

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.get(use: self.events)
    }

    @Sendable func events(_ request: Request, context: ReceiptsRequestContext) async throws -> Response {
        let principal = try context.requirePrincipal()
        let permit = try self.guards.limiter.admit(principal)
        let after = request.headers[.lastEventID] ?? request.uri.queryParameters.get("after")
        let start = try await self.hub.start(tenant: principal.tenantId, after: after)
        let credential = await StreamCredential(credential: Authenticator.credential(of: request) ?? "", principal: principal)
        let opening = OpeningStream(principal: principal, start: start, permit: permit, watchCredential: self.guards.credentials.watching(credential))
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        if let held = context.heldStream {
            // The connection's first request: NIO handlers write the body (`EventSourceHandler`).
            held.accept(opening)
            return Response(status: .ok, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in try await self.stream(opening, to: writer, request: request, context: context) })
    }

    /// The body of a stream that is not its connection's first request: it is written by the
    /// request's task, which relays the events as long as the stream is open.
    private func stream(_ opening: OpeningStream, to writer: consuming any ResponseBodyWriter, request: Request, context: ReceiptsRequestContext) async throws {
        defer { opening.permit.release() }
        // Cancelled when the client's side of the connection closes (then the connection
        // closes too): the stream ends and its place is given back at once.
        try await request.body.consumeWithCancellationOnInboundClose { _ in
            // Subscribed here, not before the response: a body that is never written
            // leaves nothing behind (events since `start` are read from the log).
            let (subscription, wakeups) = self.hub.subscribe(opening.principal, from: opening.start)
            defer { subscription.cancel() }
            let stopWatching = opening.watchCredential { self.hub.close(subscription, .credentialEnded) }
            defer { stopWatching() }
            try await writer.write(ByteBuffer(string: ServerSentEventText.opening))
            // After the head and the first line: the hub and the heartbeats write to the
            // connection directly. Closed before the response ends, however it ends: the
            // connection may carry another response next.
            let sink = LiveSink(channel: context.channel, framing: .serverSentEvents, tenant: opening.start.tenant)
            sink.startHeartbeats(every: Self.heartbeatInterval)
            let reason: EventHub.CloseReason
            do {
                reason = try await subscription.relay(wakeups, to: sink) { id, json in
                    try await writer.write(ByteBuffer(string: ServerSentEventText.event(id: id, json: json)))
                }
            } catch {
                await sink.closeFromTask()
                throw error
            }
            await sink.closeFromTask()
            try await writer.write(ByteBuffer(string: ServerSentEventText.closed(reason)))
        }
        try await writer.finish(nil)
    }
}

extension HTTPField.Name {
    static let lastEventID = Self("Last-Event-ID")!
}
