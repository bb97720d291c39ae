import Logging
import NIOCore
import ReceiptsCore

/// A stream that passed the server's checks before its first byte: who, where it starts, its
/// place under the stream caps, and how its credential is watched. The server builds it (the
/// caller, the origin, the caps, `?after=`); a `HeldStream` takes it from there.
package struct OpeningStream: Sendable {
    /// Watches the stream's credential: calls `ended` once it stops being valid (revoked,
    /// expired), and returns what stops the watch.
    package typealias CredentialWatch = @Sendable (_ ended: @escaping @Sendable () -> Void) -> @Sendable () -> Void

    package let principal: Principal
    package let start: EventHub.Start
    package let permit: StreamPermit
    package let watchCredential: CredentialWatch

    package init(principal: Principal, start: EventHub.Start, permit: StreamPermit, watchCredential: @escaping CredentialWatch) {
        self.principal = principal
        self.start = start
        self.permit = permit
        self.watchCredential = watchCredential
    }
}

/// What every stream held by NIO handlers shares: the hub it subscribes to, and the count of
/// open streams that a shutdown waits on.
package struct HeldStreams: Sendable {
    package let hub: EventHub
    package let open: OpenStreams

    package init(hub: EventHub, open: OpenStreams) {
        self.hub = hub
        self.open = open
    }

    /// Records a client's text message as a delivery acknowledgement of `principal`: returns
    /// the message to send back when the database could not record it, else nil.
    package typealias AcknowledgeDelivery = @Sendable (_ text: String, _ principal: Principal, _ logger: Logger) async -> String?

    /// Largest client frame of a WebSocket stream: README, "Limits, timeouts and faults".
    /// NIO's frame decoder refuses a larger one with close 1009.
    package static let maximumWebSocketFrameSize = 64 * 1024

    /// Holds the WebSocket stream `channel` was upgraded to, from the handshake on: its
    /// handlers go after the frame codec that the upgrade added (`WebSocketStreamHandler`).
    /// On the channel's event loop.
    package func holdWebSocket(
        on channel: any Channel, opening: OpeningStream, acknowledgeDelivery: @escaping AcknowledgeDelivery, logger: Logger
    ) throws {
        try WebSocketStreamHandler.install(on: channel, streams: self, opening: opening, acknowledgeDelivery: acknowledgeDelivery, logger: logger)
    }
}
