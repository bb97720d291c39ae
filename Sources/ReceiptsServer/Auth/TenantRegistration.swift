import Foundation
import ReceiptsCore
import ReceiptsStore

/// Creating tenants, for the admin API and `receiptsd tenant create`.
public struct TenantRegistration: Sendable {
    /// A new tenant's credentials; the API key is shown once and never stored.
    public struct Registered: Sendable {
        public let id: String
        public let name: String
        public let apiKey: String
    }

    /// Why a tenant could not be registered.
    public enum Failure: Error, Sendable {
        case invalidName
        case invalidId
        case idTaken
    }

    let store: ReceiptsStore

    public init(store: ReceiptsStore) {
        self.store = store
    }

    /// Registers a tenant named `name`, with `id` or a generated one. With `replacingKey`, an
    /// existing tenant of that id gets a new API key instead (the old one stops working).
    public func register(name: String, id: String? = nil, replacingKey: Bool = false) async throws -> Registered {
        // At most 200 as given (Unicode scalars, as JSON Schema's maxLength counts), and not
        // blank: the OpenAPI document's `CreateTenantRequest`.
        guard name.unicodeScalars.count <= 200, !name.utf8.contains(0) else { throw Failure.invalidName }
        let name = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty else { throw Failure.invalidName }
        if let id, !Identifier.isValid(id) { throw Failure.invalidId }
        let tenantId = id ?? "tenant_" + APIKeys.randomBytes(count: 9).base64URLEncoded.replacingOccurrences(of: "-", with: "_")
        let apiKey = APIKeys.generate()
        let hash = APIKeys.hash(apiKey)
        if try await self.store.createTenant(id: tenantId, name: name, apiKeyHash: hash, tokenSecret: APIKeys.randomBytes(count: 32)) {
            return Registered(id: tenantId, name: name, apiKey: apiKey)
        }
        guard replacingKey, try await self.store.replaceAPIKey(tenant: tenantId, apiKeyHash: hash) else { throw Failure.idTaken }
        return Registered(id: tenantId, name: name, apiKey: apiKey)
    }
}
