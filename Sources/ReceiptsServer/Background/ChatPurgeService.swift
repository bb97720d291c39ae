import Logging
import ReceiptsStore
import ServiceLifecycle

/// Removes the messages of deleted chats in the background, in bounded batches.
///
/// A delete answers as soon as the chat and its members are gone (every count and list is
/// right then); the messages are unreachable, and this removes them: one transaction of at
/// most `batchSize` messages at a time, with a pause after each of twice as long as it took
/// (at least `pause`), so that other chats' requests keep their latency. State is in PostgreSQL (`receipts.chat_purges`), so a purge
/// survives restarts; several instances share the work, never one chat at once (the purge row
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
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    while !Task.isCancelled {
                        let started = ContinuousClock.now
                        guard let removed = try await self.store.purgeDeletedChatBatch(limit: self.options.batchSize) else { break }
                        if removed > 0 {
                            self.logger.debug("purged messages of a deleted chat", metadata: ["receipts.messages": "\(removed)"])
                        }
                        try? await Task.sleep(for: max(self.options.pause, (ContinuousClock.now - started) * self.options.pauseFactor))
                    }
                } catch {
                    self.logger.warning("purging deleted chats failed", metadata: ["error": "\(error)"])
                }
                await self.signal.wait(atMost: self.options.pollInterval)
            }
        }
    }
}
