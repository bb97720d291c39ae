import Hummingbird
import HummingbirdCore
import Logging
import NIOCore

/// The HTTP/1 child channel with the event stream's WebSocket upgrade, with the connection limits
/// (README, "Limits, timeouts and faults") added: an `HTTPConnectionGuard` on every
/// connection, and a connection that its task's cancellation closes (so a shutdown escalated past its grace period ends
/// every connection's task at once, whatever the client does).
struct GuardedHTTPChannel: ServerChildChannel {
    typealias Value = EventStreamUpgradeChannel.Value

    let base: EventStreamUpgradeChannel
    let limits: ConnectionTimeline.Limits

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let connectionGuard = HTTPConnectionGuard(limits: self.limits, logger: logger)
        do {
            // First in the pipeline, so that it sees the bytes before the request decoder.
            try channel.pipeline.syncOperations.addHandler(connectionGuard.receivedBytes, position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        // Setup runs on the channel's event loop, so its future completes there.
        return self.base.setup(channel: channel, logger: logger).assumeIsolated().flatMapThrowing { value in
            // Last, right after the WebSocket upgrader that the base set up: the handlers for
            // plain HTTP (or for WebSocket frames) go after it once the upgrader has decided.
            try channel.pipeline.syncOperations.addHandler(connectionGuard, position: .last)
            return value
        }.nonisolated()
    }

    func handle(value: Value, logger: Logger) async {
        await withTaskCancellationHandler {
            await self.base.handle(value: value, logger: logger)
        } onCancel: {
            value.channel.close(promise: nil)
        }
    }
}
