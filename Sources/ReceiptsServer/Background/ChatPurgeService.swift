import Logging
import ReceiptsStore
import ServiceLifecycle

/// Removes the messages of deleted chats in the background, in bounded batches.
///
/// A delete answers as soon as the chat and its members are gone (every count and list is
/// right then); the messages are unreachable, and this removes them: one transaction of at
/// most `batchSize` messages at a time, paced (`PacedWork`) so that other chats' requests keep
/// their latency. State is in PostgreSQL (`receipts.chat_purges`), so a purge survives
/// restarts; several instances share the work, never one chat at once (the purge row
/// is locked, SKIP LOCKED, by the batch that holds it).
struct ChatPurgeService: Service {
    struct Options: Sendable {
        /// Messages removed per transaction.
        var batchSize = 2000
        /// Shortest pause between two batches.
        var pause: Duration = .milliseconds(20)
        /// Pause after a batch, as a multiple of the time it took.
        var pauseFactor = 2
        /// How often to look for work given by other instances (or left by a restart).
        var pollInterval: Duration = .seconds(5)
    }

    let store: ReceiptsStore
    let signal: WorkSignal
    var options = Options()
    let logger: Logger

    func run() async throws {
        let pacing = PacedWork(pause: self.options.pause, pauseFactor: self.options.pauseFactor, pollInterval: self.options.pollInterval)
        await pacing.run(signal: self.signal, logger: self.logger, failure: "purging deleted chats failed") {
            guard let removed = try await self.store.purgeDeletedChatBatch(limit: self.options.batchSize) else { return false }
            if removed > 0 {
                self.logger.debug("purged messages of a deleted chat", metadata: ["receipts.messages": "\(removed)"])
            }
            return true
        }
    }
}
