import Logging
import NIOCore
import ReceiptsCore

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
