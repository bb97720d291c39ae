import ReceiptsCore

/// A stream that passed the server's checks before its first byte: who, where it starts, its
/// place under the stream caps, and how its credential is watched. The server builds it (the
/// caller, the origin, the caps, `?after=`); a `HeldStream` takes it from there.
package struct OpeningStream: Sendable {
    /// Watches the stream's credential: calls `ended` once it stops being valid (revoked,
    /// expired), and returns what stops the watch.
    package typealias CredentialWatch = @Sendable (_ ended: @escaping @Sendable () -> Void) -> @Sendable () -> Void

    package let principal: Principal
    package let start: EventHub.Start
    package let permit: StreamPermit
    package let watchCredential: CredentialWatch

    package init(principal: Principal, start: EventHub.Start, permit: StreamPermit, watchCredential: @escaping CredentialWatch) {
        self.principal = principal
        self.start = start
        self.permit = permit
        self.watchCredential = watchCredential
    }
}
