// Read-your-writes through read replicas (docs/api.md, "Read-your-writes: the consistency
// token"). The client does it by itself: it keeps the token of each write it makes and
// sends it with the reads a standby may serve (`ConsistencyTokenMiddleware`).

extension ReceiptsClient {
    /// The newest consistency token this client holds: of the writes it made that were
    /// answered 2xx and the tokens it adopted, the latest position; nil before either. Its reads of unread counts, a chat, messages and a message send it, and the
    /// service answers them from data at least as new as that write.
    ///
    /// Opaque: pass it on as it is (to another process, with a job it queues), never parse
    /// or compare it. Copies of a client share it.
    public var consistencyToken: String? { self.consistencyTokens.current }

    /// Makes `token` the one this client's reads send from now on, so that they see a write
    /// made elsewhere: by another `ReceiptsClient` of the backend (one with a user token,
    /// say), by another process, or by a web client that handed its token over.
    ///
    /// ```swift
    /// let sent = try await receipts.send("Hi!", in: "team", from: "alice")
    /// // Elsewhere, with the token passed along with the message's id:
    /// if let token = receipts.consistencyToken { worker.adoptConsistencyToken(token) }
    /// let message = try await worker.receipt(of: sent.id, in: "team", viewer: "alice")  // never 404
    /// ```
    ///
    /// The client keeps the newer of the adopted token and the one it holds (it knows the
    /// service's spelling of a position); a token it cannot read that way replaces the one
    /// held. This client's next write replaces it in turn.
    public func adoptConsistencyToken(_ token: String) {
        self.consistencyTokens.replace(with: token)
    }
}
