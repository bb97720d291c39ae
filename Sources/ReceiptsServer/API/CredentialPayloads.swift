import Foundation
import Hummingbird
import ReceiptsStore

/// `POST /admin/v1/tenants/{tenantId}/keys` answer: `{"keyId","apiKey","createdAt"}`, the key
/// shown this once.
struct CreatedKeyResponse: JSONResponse {
    let keyId: String
    let apiKey: String
    let createdAt: Date
}

/// `GET /admin/v1/tenants/{tenantId}/keys` answer: `{"keys":[{"keyId","createdAt","lastUsedAt"}]}`
/// (never a key).
struct KeyListResponse: JSONResponse {
    struct Key: Encodable {
        let keyId: String
        let createdAt: Date
        let lastUsedAt: Date?
    }

    let keys: [Key]

    init(_ keys: [APIKeyRecord]) {
        self.keys = keys.map { Key(keyId: $0.keyId, createdAt: $0.createdAt, lastUsedAt: $0.lastUsedAt) }
    }
}

/// `POST /v1/users/{userId}/tokens/revoke` answer: `{"userId","revokedBefore"}`.
struct RevokedTokensResponse: JSONResponse {
    let userId: String
    let revokedBefore: Date
}

/// `POST /admin/v1/tenants/{tenantId}/token-secret/rotate` answer: `{"rotatedAt"}`.
struct RotatedSecretResponse: JSONResponse {
    let rotatedAt: Date
}
