import Logging
import ReceiptsStore
import ServiceLifecycle
import Synchronization

/// Which API keys requests used, recorded in the database (`last_used_at`) once a while
/// rather than once a request: the admin API's key list shows when a key was last used, to
/// within `APIKeyUseRecorder.interval`.
final class APIKeyUse: Sendable {
    /// At most this many distinct keys are held between two records (each tenant has at most
    /// 10); a key used beyond that is not noted this round, only when used after it.
    static let capacity = 100_000
    private let hashes = Mutex<Set<[UInt8]>>([])

    /// A request used the key with this hash.
    func used(_ hash: [UInt8]) {
        self.hashes.withLock { hashes in
            if hashes.count < Self.capacity { hashes.insert(hash) }
        }
    }

    /// The keys used since the last call.
    func take() -> [[UInt8]] {
        self.hashes.withLock { hashes in
            defer { hashes = [] }
            return Array(hashes)
        }
    }
}

/// Writes the keys' use (`APIKeyUse`) to the database every `interval`, and once more on
/// shutdown.
struct APIKeyUseRecorder: Service {
    let use: APIKeyUse
    let store: ReceiptsStore
    var interval: Duration = .seconds(30)
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: self.interval)
                await self.record()
            }
        }
        await self.record()
    }

    private func record() async {
        let hashes = self.use.take()
        guard !hashes.isEmpty else { return }
        do {
            // In batches, so that no statement grows with the number of tenants.
            for start in stride(from: 0, to: hashes.count, by: 1000) {
                try await self.store.recordAPIKeyUse(hashes: Array(hashes[start..<min(start + 1000, hashes.count)]))
            }
        } catch {
            self.logger.debug("recording the use of API keys failed", metadata: ["error": "\(error)"])
        }
    }
}
