/// When and how often a call is repeated: only idempotent calls, only after a 503
/// (`unavailable`) or a connection error, a bounded number of times with a growing, jittered
/// and capped pause between attempts. A call that is not idempotent is never repeated
/// silently: its error reaches the caller.
public struct RetryPolicy: Sendable {
    /// Attempts in all, the first included (1: never retry).
    public var maximumAttempts: Int
    /// The pause before the first retry; each further one doubles it, up to `maximumDelay`.
    public var initialDelay: Duration
    public var maximumDelay: Duration

    public init(maximumAttempts: Int = 4, initialDelay: Duration = .milliseconds(200), maximumDelay: Duration = .seconds(2)) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// Never retry.
    public static let never = RetryPolicy(maximumAttempts: 1)

    /// The pause before retry `retry` (1 for the first), with jitter so that many clients
    /// that failed together do not come back together.
    func delay(beforeRetry retry: Int) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(1, min(retry, 30)) where delay < maximumDelay { delay *= 2 }
        return min(delay, maximumDelay) * Double.random(in: 0.5...1.0)
    }

    /// The operations that are idempotent by the contract: every read, and the writes the
    /// contract calls idempotent (creating a chat with the same members, joining, leaving,
    /// editing a message to the same text, marking, settings). Not `createTenant` (a second
    /// tenant), not `createToken`, and `sendMessage` only when the message carries its own
    /// id (see `ReceiptsClient.send`).
    static let idempotentOperations: Set<String> = [
        "putChat", "getChat", "addMember", "removeMember", "listMessages", "getMessage", "editMessage",
        "markRead", "markDelivered", "markUnread", "getUnread", "putSettings", "putMemberSettings",
        "healthz", "readyz", "metrics", "openapi",
    ]

    /// Set by the face around a `sendMessage` whose body names the message's id: repeating
    /// it answers 200 with the same message instead of creating a second one.
    @TaskLocal static var sendCarriesID = false

    static func isIdempotent(_ operationID: String) -> Bool {
        idempotentOperations.contains(operationID) || (operationID == "sendMessage" && sendCarriesID)
    }
}
