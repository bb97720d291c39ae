import Foundation
import JWTKit
import ReceiptsCore

/// The credential a stream was opened with, watched for as long as the stream is open
/// (`StreamCredentialWatch`): a stream must not outlive it.
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
}
