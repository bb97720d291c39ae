import Logging
import NIOConcurrencyHelpers
import ReceiptsStore

/// Wakes the other instances of the service after this one's writes, while there are any.
///
/// Each instance's event hub reads the log when told that it grew: by this process's own
/// writes (`CommittedWrites`), and by `NOTIFY receipts_events` for everyone else's. The
/// service's writes send no NOTIFY from their own transactions (see
/// sql/functions/events.sql: a NOTIFY in every writing transaction would make them commit
/// one by one), so this sends one instead, with this instance's payload, one at a time:
/// writes that commit while one is sent share the next. And only while another instance is
/// heard (`PeerInstances`): alone, an instance notifies nobody. It announces itself when its
/// listener connects, every `announcementInterval`, and at once when it hears a peer it did
/// not know, so two instances know of each other within a round trip.
final class PeerNotifier: Sendable {
    private struct State {
        var peers: PeerInstances
        /// The next notification goes out even when no peer is known (an announcement).
        var announcementDue = false
    }

    /// This instance's payload, which its own hub ignores.
    let payload = PeerInstances.payloadPrefix + String(UInt64.random(in: 1...UInt64.max), radix: 36)
    private let store: ReceiptsStore
    private let logger: Logger
    private let state: NIOLockedValueBox<State>
    /// Asks for one NOTIFY (requests coalesce while one is sent): after every write of this
    /// process (`CommittedWrites`), and for announcements.
    private let requests: AsyncStream<Void>
    private let request: AsyncStream<Void>.Continuation

    init(store: ReceiptsStore, announcementInterval: Duration, logger: Logger) {
        self.store = store
        self.logger = logger
        self.state = NIOLockedValueBox(State(peers: PeerInstances(announcementInterval: announcementInterval)))
        (self.requests, self.request) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Sends notifications (after this process's writes while peers are heard, and
    /// announcements) until cancelled.
    func run() async {
        // After this process's writes only while a peer is heard: alone, a write wakes nobody.
        self.store.committedWrites.wake(self.request) { [state] in state.withLockedValue { $0.peers.arePresent(at: .now) } }
        let interval = self.state.withLockedValue { $0.peers.announcementInterval }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.sendNotifications() }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    self.announce()
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Tells the other instances that this one listens (on connecting, and periodically).
    func announce() {
        self.state.withLockedValue { $0.announcementDue = true }
        self.request.yield()
    }

    /// A notification on the event log's channel with `payload`: when it is a peer's that was
    /// not known, this instance announces itself at once, so that the new peer knows of it too.
    func heard(_ payload: String) {
        guard PeerInstances.isPeer(payload, own: self.payload) else { return }
        if self.state.withLockedValue({ $0.peers.heard(at: .now) }) { self.announce() }
    }

    private func sendNotifications() async {
        for await _ in self.requests {
            let sends = self.state.withLockedValue { state -> Bool in
                defer { state.announcementDue = false }
                return state.announcementDue || state.peers.arePresent(at: .now)
            }
            guard sends else { continue }
            do {
                try await self.store.notifyListeners(payload: self.payload)
            } catch {
                self.logger.warning("notifying other instances failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
