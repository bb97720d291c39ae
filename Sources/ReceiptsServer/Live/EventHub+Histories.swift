import Logging
import NIOConcurrencyHelpers
import ReceiptsStore

/// How the hub follows the database's event history (`EventHistory`,
/// sql/functions/histories.sql): every read of the log names the history it was made in, and
/// a read in another one (a failover, a restore) makes the hub follow it.
extension EventHub {
    /// The histories that led to the current one (nil before the hub has first looked at the log).
    var history: EventHistory? {
        self.state.withLockedValue { $0.log.history }
    }

    /// `readyPosition()`, and where the tenant's log stands, read in the same event history:
    /// when the database has gone on to another one (a failover) that the hub has not followed
    /// yet, it waits until it has.
    func readyLogPosition(tenant: String) async throws -> (position: Int64, history: EventHistory, log: EventLogPosition) {
        let deadline = ContinuousClock.now + max(.seconds(10), self.options.abandonGapsAfter + .seconds(2))
        while true {
            let (current, history) = try await self.readyPosition()
            let log = try await self.store.eventLogPosition(tenant: tenant)
            if log.history == history.currentId { return (current, history, log) }
            guard ContinuousClock.now < deadline else { throw NotReady() }
            self.requestRefresh()
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Takes `history` (the lineage the database reports now) as the hub's. After the first
    /// look, that means the database went on to another history (a failover or a restore):
    /// the cursor starts again as at start, every feed drops what it holds and waits for it,
    /// and each subscriber goes on from its position or the newest one the new history kept,
    /// after `resync.required` when its client may hold events that were lost
    /// (`Feed.follow(_:from:)`).
    func follow(_ history: EventHistory) {
        let previous = self.state.withLockedValue { state -> EventHistory? in
            guard let previous = state.log.follow(history) else { return nil }
            state.fanOut.follow(history, from: previous.currentId)
            return previous
        }
        guard let previous else { return }
        let segment = history.segments[history.segments.count - 1]
        self.logger.warning(
            "the database went on to another event history (a failover or a restore): streams resume where it kept their position, and get resync.required where it did not",
            metadata: [
                "history": "\(segment.id)", "previous": "\(previous.currentId)", "resumableThrough": "\(segment.resumableThrough)",
                "startedAfter": "\(segment.startedAfter)",
            ])
    }

    /// Records the cursor's position in the database about once a second
    /// (`ReceiptsStore.settleEventHistory`): where a history that begins after a failover starts
    /// checking what it kept, so that positions from just before it still resume.
    func settleHistory() async {
        var settled: (history: String, position: Int64)?
        while !Task.isCancelled {
            try? await Task.sleep(for: self.options.historySettleInterval)
            let current = self.state.withLockedValue { state -> (history: String, position: Int64)? in
                state.log.ready.map { ($0.history.currentId, $0.position) }
            }
            guard let current, settled.map({ $0 != current }) ?? true else { continue }
            do {
                if try await self.store.settleEventHistory(current.history, through: current.position) {
                    settled = current
                } else {
                    // The database went on to another history (a failover, with no write since
                    // to make the hub look): look now.
                    self.requestRefresh()
                }
            } catch {
                self.logger.debug("recording the event hub's position failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
