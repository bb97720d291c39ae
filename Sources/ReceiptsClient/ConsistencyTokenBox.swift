import Synchronization

/// The consistency token a client holds: the one its reads send (`Receipts-Consistency-Token`,
/// docs/api.md). One box per client, shared by its copies and by every call, concurrent
/// ones included, so a read started after a write was answered sends that write's token.
///
/// Tokens are opaque (the position of a commit, in the server's own spelling), so the client
/// never compares two: the newest is the one received last, and each replaces the one held.
final class ConsistencyTokenBox: Sendable {
    private let token: Mutex<String?>

    init(_ token: String? = nil) {
        self.token = Mutex(token)
    }

    /// The token held, nil before the first write was answered or a token adopted.
    var current: String? { self.token.withLock { $0 } }

    /// Holds `token` from now on, in place of the one held.
    func replace(with token: String) {
        self.token.withLock { $0 = token }
    }
}
