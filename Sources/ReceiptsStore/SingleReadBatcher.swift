import Postgres
import Synchronization

/// Gathers concurrent single-message mark-reads of a tenant into one call of
/// `receipts.mark_read_each` (see `sql/migrations/0004_faster_writes.sql`).
///
/// A read that finds fewer than `concurrentBatches` calls of its tenant under way starts
/// one at once, alone, so an idle service adds no wait. Reads that arrive while calls run
/// go together into the next one: up to `maximumBatch`, and never two of one chat and user
/// at a time (a user's reads in one chat follow each other, as separate requests would).
/// Each read gets the answer `receipts.mark_read` would have given it.
final class SingleReadBatcher: Sendable {
    typealias Outcome = Result<(marked: Int, unreadCount: Int), MarkFailure>

    struct Read: Sendable {
        let chat: String
        let user: String
        let message: String
        let reply: CheckedContinuation<Outcome, any Error>
    }

    private struct State {
        var waiting: [String: [Read]] = [:]
        /// Calls under way, per tenant.
        var running: [String: Int] = [:]
        /// The (tenant, chat, user) of every read in a call under way.
        var marking: Set<[String]> = []
    }

    let maximumBatch: Int
    /// Calls of one tenant at a time: two keep both of PostgreSQL's cores busy on a small
    /// machine while the next batch gathers.
    let concurrentBatches: Int
    private let state = Mutex(State())

    init(maximumBatch: Int = 100, concurrentBatches: Int = 2) {
        self.maximumBatch = maximumBatch
        self.concurrentBatches = concurrentBatches
    }

    func markRead(tenant: String, chat: String, user: String, message: String, store: ReceiptsStore) async throws -> Outcome {
        try await withCheckedThrowingContinuation { reply in
            let starts = self.state.withLock { state in
                state.waiting[tenant, default: []].append(Read(chat: chat, user: user, message: message, reply: reply))
                guard state.running[tenant, default: 0] < self.concurrentBatches else { return false }
                state.running[tenant, default: 0] += 1
                return true
            }
            if starts {
                Task { await self.drain(tenant, store: store) }
            }
        }
    }

    /// Runs the tenant's waiting reads, batch after batch, until none is left that another
    /// call is not already marking for the same chat and user.
    private func drain(_ tenant: String, store: ReceiptsStore) async {
        var finished: [Read] = []
        while let batch = self.nextBatch(of: tenant, after: finished) {
            do {
                let outcomes = try await store.markReadEach(tenant: tenant, batch)
                for (read, outcome) in zip(batch, outcomes) { read.reply.resume(returning: outcome) }
            } catch {
                for read in batch { read.reply.resume(throwing: error) }
            }
            finished = batch
        }
    }

    /// Releases the reads of the finished batch and takes the next one off the queue, or
    /// ends this call's run when nothing can go.
    private func nextBatch(of tenant: String, after finished: [Read]) -> [Read]? {
        self.state.withLock { state in
            for read in finished { state.marking.remove([tenant, read.chat, read.user]) }
            var batch: [Read] = []
            var later: [Read] = []
            for read in state.waiting[tenant] ?? [] {
                if batch.count < self.maximumBatch, state.marking.insert([tenant, read.chat, read.user]).inserted {
                    batch.append(read)
                } else {
                    later.append(read)
                }
            }
            state.waiting[tenant] = later.isEmpty ? nil : later
            guard batch.isEmpty else { return batch }
            state.running[tenant, default: 1] -= 1
            if state.running[tenant] == 0 { state.running[tenant] = nil }
            return nil
        }
    }
}
