import Foundation
import Hummingbird
import ReceiptsStore

/// `POST /admin/v1/tenants/{tenantId}/keys` answer: `{"keyId","apiKey","createdAt"}`, the key
/// shown this once.
struct CreatedKeyResponse: JSONResponse {
    let keyId: String
    let apiKey: String
    let createdAt: Date

    func write(to json: inout JSONWriter) {
        json.raw(#"{"keyId":"#)
        json.string(self.keyId)
        json.raw(#","apiKey":"#)
        json.string(self.apiKey)
        json.raw(#","createdAt":"#)
        json.timestamp(self.createdAt)
        json.raw("}")
    }
}

/// `GET /admin/v1/tenants/{tenantId}/keys` answer: `{"keys":[{"keyId","createdAt","lastUsedAt"}]}`
/// (never a key).
struct KeyListResponse: JSONResponse {
    let keys: [APIKeyRecord]

    func write(to json: inout JSONWriter) {
        json.raw(#"{"keys":["#)
        for (index, key) in self.keys.enumerated() {
            json.raw(index == 0 ? #"{"keyId":"# : #",{"keyId":"#)
            json.string(key.keyId)
            json.raw(#","createdAt":"#)
            json.timestamp(key.createdAt)
            json.raw(#","lastUsedAt":"#)
            json.timestamp(key.lastUsedAt)
            json.raw("}")
        }
        json.raw("]}")
    }
}

/// `POST /v1/users/{userId}/tokens/revoke` answer: `{"userId","revokedBefore"}`.
struct RevokedTokensResponse: JSONResponse {
    let userId: String
    let revokedBefore: Date

    func write(to json: inout JSONWriter) {
        json.raw(#"{"userId":"#)
        json.string(self.userId)
        json.raw(#","revokedBefore":"#)
        json.timestamp(self.revokedBefore)
        json.raw("}")
    }
}

/// `POST /admin/v1/tenants/{tenantId}/token-secret/rotate` answer: `{"rotatedAt"}`.
struct RotatedSecretResponse: JSONResponse {
    let rotatedAt: Date

    func write(to json: inout JSONWriter) {
        json.raw(#"{"rotatedAt":"#)
        json.timestamp(self.rotatedAt)
        json.raw("}")
    }
}
