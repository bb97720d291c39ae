import Synchronization

/// The consistency token a client holds: the one its reads send (`Receipts-Consistency-Token`,
/// docs/api.md). One box per client, shared by its copies and by every call, concurrent
/// ones included, so a read started after a write was answered sends that write's token.
///
/// Tokens are opaque to callers. The client knows the service's spelling of this version
/// (`r1.` and 16 hexadecimal digits, a commit's position), so for two such tokens it keeps the
/// later position: two writes answered out of order (concurrent calls) leave the newer one.
/// Any other token (a later version of the service's) simply replaces the one held.
final class ConsistencyTokenBox: Sendable {
    private let token: Mutex<String?>

    init(_ token: String? = nil) {
        self.token = Mutex(token)
    }

    /// The token held, nil before the first write was answered or a token adopted.
    var current: String? { self.token.withLock { $0 } }

    /// Holds `token` from now on in place of the one held, unless both are positions of
    /// this version and the one held is later.
    func replace(with token: String) {
        self.token.withLock { held in
            if let held, Self.isVersionOne(held), Self.isVersionOne(token), held > token { return }
            held = token
        }
    }

    /// `r1.` and 16 upper-case hexadecimal digits: such tokens order as their positions do.
    private static func isVersionOne(_ token: String) -> Bool {
        token.utf8.count == 19 && token.hasPrefix("r1.")
    }
}
