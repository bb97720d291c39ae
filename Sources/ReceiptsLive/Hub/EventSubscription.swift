import ReceiptsCore
import ServiceLifecycle

/// One open stream's view of the hub: the events after its position.
package struct EventSubscription: Sendable {
    let hub: EventHub
    let id: Int
    package let tenant: String
    let principal: Principal
    /// Set when the client asked to resume from an unknown or expired id, or one of a history
    /// the database lost.
    package let resync: EventHub.Resync?

    /// Its place in the hub's fan-out.
    var key: EventFanOut.Key { EventFanOut.Key(tenant: self.tenant, id: self.id) }

    /// Sends everything the subscriber may see, in order, until the subscription is closed
    /// or `send` throws, pulling whenever `wakeups` (the subscription's:
    /// `EventHub.subscribe(_:from:closesOnHistoryChange:)`) yields.
    ///
    /// Whenever it is up to date, it asks the hub to write what follows to `sink` itself (live
    /// delivery: `EventHub.goLive`), and sends again only when the hub wakes it to pull (its
    /// socket fell behind, or the database went on to another history).
    ///
    /// - Returns: why the hub closed the subscription. Before a stream writes its end, it
    ///   closes `sink` (`LiveSink.close()`), so that no event of the hub's follows it.
    /// On graceful shutdown of the server (SIGTERM), the stream ends with `.shuttingDown`:
    /// the server waits for open connections, so streams must not wait for the hub.
    package func relay(
        _ wakeups: AsyncStream<Void>,
        to sink: LiveSink?,
        _ send: (_ id: String, _ json: String) async throws -> Void
    ) async throws -> EventHub.CloseReason {
        try await withGracefulShutdownHandler {
            try await self.relayUntilClosed(wakeups, to: sink, send)
        } onGracefulShutdown: {
            self.hub.close(self, .shuttingDown)
        }
    }

    private func relayUntilClosed(
        _ wakeups: AsyncStream<Void>,
        to sink: LiveSink?,
        _ send: (_ id: String, _ json: String) async throws -> Void
    ) async throws -> EventHub.CloseReason {
        var resync = self.resync
        do {
            for await _ in wakeups {
                try await self.catchUp(after: resync, goingLiveTo: sink) { events in
                    for event in events { try await send(event.id, event.json) }
                }
                resync = nil
            }
            // The wake-ups end when the hub closes the subscription; this throws its reason.
            _ = try await self.hub.nextEvents(for: self)
            return .shuttingDown
        } catch let reason as EventHub.CloseReason {
            return reason
        }
    }

    /// Pulls until the subscription is up to date, sending each batch in order (`resync`
    /// first, when given), then hands what follows to `sink` (live delivery:
    /// `EventHub.goLive`). Throws `EventHub.CloseReason` when the hub closed the subscription.
    func catchUp(
        after resync: EventHub.Resync?, goingLiveTo sink: LiveSink?,
        _ send: ([(id: String, json: String)]) async throws -> Void
    ) async throws {
        // What the hub handed the socket's event loop while the stream was live is older than
        // anything pulled now: written first.
        if let sink, sink.hasWaitingWrites { await sink.writeWaiting() }
        if let resync { try await send([(resync.eventId, resync.json)]) }
        while true {
            let batch = try await self.hub.nextEvents(for: self)
            let events = (batch.resync.map { [($0.eventId, $0.json)] } ?? []) + batch.events.map { ($0.eventId, $0.json) }
            if !events.isEmpty { try await send(events) }
            if batch.isUpToDate { break }
        }
        if let sink { self.hub.goLive(self, sink: sink) }
    }

    package func cancel() {
        self.hub.unsubscribe(self)
    }
}
