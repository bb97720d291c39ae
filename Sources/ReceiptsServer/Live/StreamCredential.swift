import Foundation
import HTTPTypes
import JWTKit
import Logging

/// The credential a stream was opened with, watched for as long as the stream is open: a
/// stream must not outlive it (the contract: a stream whose
/// credential stops being valid closes, WebSocket 1008, SSE ends).
///
/// A user token ends at its `exp`, known exactly: read from the token, which was verified when
/// the stream opened. A change of the tenant's credentials (a key removed, tokens revoked, the
/// secret rotated, on any instance: `CredentialChanges`) has the credential checked again at
/// once, so the stream closes within about a second of it. Any credential, an API key in
/// particular (changed in psql, without the NOTIFY), is also checked again every
/// `checkInterval` with the `Authenticator`, the same check a new request passes, on what the database held at most
/// half a `checkInterval` before: a key that request would refuse (401) ends the stream
/// within one and a half intervals and a reload of the credential directory (at most two
/// reloads an interval, shared by every stream), not within the directory's own lifetime of
/// a minute. A check
/// that fails for any other reason (the database is out) keeps the stream open: the events it
/// carries come from the same database, and an outage must not make every client reconnect.
struct StreamCredential: Sendable {
    let credential: String
    let principal: Principal
    /// The user token's expiry; nil for an API key.
    let expiresAt: Date?

    /// Reads the expiry of a user token (already verified by the `Authenticator`).
    init(credential: String, principal: Principal) async {
        self.credential = credential
        self.principal = principal
        if principal.tokenUser != nil {
            self.expiresAt = try? await JWTKeyCollection().unverified(credential, as: UserTokens.Claims.self).exp.value
        } else {
            self.expiresAt = nil
        }
    }

    /// Returns once the credential is no longer valid; runs until cancelled while it is.
    func waitUntilInvalid(authenticator: Authenticator, checkInterval: Duration, logger: Logger) async throws {
        while true {
            var pause = checkInterval
            if let expiresAt {
                let remaining = expiresAt.timeIntervalSinceNow
                if remaining <= 0 { return }
                pause = min(pause, .milliseconds(Int64((remaining * 1000).rounded(.up))))
            }
            // Woken early when the tenant's credentials change (on any instance).
            _ = await authenticator.changes.wait(tenant: self.principal.tenantId, atMost: pause)
            try Task.checkCancellation()
            if let expiresAt, expiresAt.timeIntervalSinceNow <= 0 { return }
            do {
                let current = try await authenticator.principal(for: self.credential, knownWithin: checkInterval / 2)
                if current != self.principal { return }
            } catch let error as APIError where error.status == .unauthorized {
                return
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                logger.warning(
                    "checking a stream's credential failed; the stream stays open",
                    metadata: ["receipts.tenant_id": "\(self.principal.tenantId)", "error": "\(String(reflecting: type(of: error)))"])
            }
        }
    }
}
