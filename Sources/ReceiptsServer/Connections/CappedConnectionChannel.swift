import HummingbirdCore
import Logging
import NIOCore

/// The server's child channel within the connection cap (`ConnectionSlots`): a connection
/// that gets a place is served by `base`; one past the cap is answered at once by
/// `OverCapResponder` or closed, and never reaches the application.
struct CappedConnectionChannel<Base: ServerChildChannel>: ServerChildChannel {
    /// A connection served, or one refused (its task only waits for it to close).
    enum Value: ServerChildChannelValue {
        case admitted(Base.Value)
        case refused(any Channel)

        var channel: any Channel {
            switch self {
            case .admitted(let value): value.channel
            case .refused(let channel): channel
            }
        }
    }

    let base: Base
    let slots: ConnectionSlots
    /// How long a connection past the cap may take to send its request head.
    let headTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let admission = self.slots.admit()
        let slots = self.slots
        channel.closeFuture.whenComplete { _ in slots.release(admission) }
        if case .admitted = admission {
            return self.base.setup(channel: channel, logger: logger).map { .admitted($0) }
        }
        if slots.shouldLogRefusal(now: NIODeadline.now().uptimeNanoseconds) {
            logger.warning(
                "at the connection limit: new connections are answered 503 (or closed) until some close",
                metadata: ["receipts.maximum_connections": "\(slots.maximum)"])
        }
        switch admission {
        case .admitted:
            break
        case .answeredOverCap:
            do {
                try OverCapResponder.install(on: channel, headTimeout: self.headTimeout)
            } catch {
                channel.close(promise: nil)
            }
        case .closed:
            channel.close(promise: nil)
        }
        return channel.eventLoop.makeSucceededFuture(.refused(channel))
    }

    func handle(value: Value, logger: Logger) async {
        switch value {
        case .admitted(let value):
            await self.base.handle(value: value, logger: logger)
        case .refused(let channel):
            // Closed by the responder's answer or its head timeout, whichever comes first.
            try? await channel.closeFuture.get()
        }
    }
}
