import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `GET /v1/events`: the event stream as Server-Sent Events.
///
/// Each event is `id: <id>` and `data: <json>`; `Last-Event-ID` resumes after that id; a
/// comment line every 15 seconds keeps proxies from closing an idle stream.
struct EventStreamController {
    static let heartbeatInterval = Duration.seconds(15)

    let hub: EventHub

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.get(use: self.events)
    }

    @Sendable func events(_ request: Request, context: ReceiptsRequestContext) async throws -> Response {
        let principal = try context.requirePrincipal()
        let after = request.headers[.lastEventID] ?? request.uri.queryParameters.get("after")
        let start = try await self.hub.start(tenant: principal.tenantId, after: after)
        let subscription = await self.hub.subscribe(principal, from: start)
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            defer { subscription.cancel() }
            try await writer.write(ByteBuffer(string: ": receipts event stream\n\n"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    while !Task.isCancelled {
                        try await Task.sleep(for: Self.heartbeatInterval)
                        self.hub.wake(subscription)
                    }
                }
                var lastWrite = ContinuousClock.now
                let reason = try await subscription.relay(
                    { id, json in
                        try await writer.write(ByteBuffer(string: "id: \(id)\ndata: \(json)\n\n"))
                        lastWrite = .now
                    },
                    whenIdle: {
                        if ContinuousClock.now - lastWrite >= Self.heartbeatInterval {
                            try await writer.write(ByteBuffer(string: ": heartbeat\n\n"))
                            lastWrite = .now
                        }
                    }
                )
                try await writer.write(ByteBuffer(string: ": closed: \(reason.rawValue)\n\n"))
                group.cancelAll()
            }
            try await writer.finish(nil)
        })
    }
}

extension HTTPField.Name {
    static let lastEventID = Self("Last-Event-ID")!
}
