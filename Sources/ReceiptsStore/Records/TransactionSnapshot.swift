/// A PostgreSQL snapshot (`pg_current_snapshot()`, text form `xmin:xmax:xip,…`): which
/// transactions had finished when it was taken.
///
/// The event log's readers use it for two questions: may a missing event id still appear
/// (was its writer still running?), and did an event commit before a stream started?
public struct TransactionSnapshot: Sendable, Hashable {
    /// Every transaction id below this one had finished.
    public let lowestRunning: Int64
    /// No transaction id at or above this one had started.
    public let firstUnassigned: Int64
    /// The transactions in between that were still running.
    public let running: Set<Int64>

    public init(lowestRunning: Int64, firstUnassigned: Int64, running: Set<Int64>) {
        self.lowestRunning = lowestRunning
        self.firstUnassigned = firstUnassigned
        self.running = running
    }

    /// Parses the text form, e.g. `"748:752:748,750"`.
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let lowest = Int64(parts[0]), let unassigned = Int64(parts[1]) else { return nil }
        var running = Set<Int64>()
        for id in parts[2].split(separator: ",") {
            guard let id = Int64(id) else { return nil }
            running.insert(id)
        }
        self.init(lowestRunning: lowest, firstUnassigned: unassigned, running: running)
    }

    /// Whether `transaction` had finished (committed or aborted) when the snapshot was taken.
    public func hasFinished(_ transaction: Int64) -> Bool {
        transaction < self.firstUnassigned && !self.running.contains(transaction)
    }

    /// Whether every one of `transactions` has finished by this snapshot.
    public func hasFinished(all transactions: Set<Int64>) -> Bool {
        transactions.allSatisfy(self.hasFinished)
    }
}
