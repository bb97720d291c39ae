import Logging
import ReceiptsStore
import ServiceLifecycle

/// Deletes events older than the retention period, once at start and then every hour.
package struct EventRetentionService: Service {
    let store: ReceiptsStore
    let retentionSeconds: Int
    let interval: Duration
    let logger: Logger

    package init(store: ReceiptsStore, retentionSeconds: Int, interval: Duration, logger: Logger) {
        self.store = store
        self.retentionSeconds = retentionSeconds
        self.interval = interval
        self.logger = logger
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let pruned = try await self.store.pruneEvents(olderThanSeconds: self.retentionSeconds)
                    if pruned > 0 { self.logger.info("pruned old events", metadata: ["receipts.events": "\(pruned)"]) }
                } catch {
                    self.logger.warning("pruning events failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: self.interval)
            }
        }
    }
}
