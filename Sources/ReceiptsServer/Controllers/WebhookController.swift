import Foundation
import Hummingbird
import ReceiptsCore
import ReceiptsLive
import ReceiptsStore

/// `/v1/webhooks`: where a tenant's events are pushed (tenant key only).
struct WebhookController {
    /// The most webhooks a tenant may have (one more is 409): each costs a delivery loop and
    /// an HTTP client on the instance that holds it.
    static let maximumPerTenant = 10
    static let secretLengths = 16...128
    /// How long the secret a rotation replaced goes on signing beside the new one.
    static let rotationOverlap = Duration.seconds(24 * 3600)

    let store: ReceiptsStore
    let hub: EventHub
    let dispatcher: WebhookDispatcher
    let addressPolicy: WebhookAddressPolicy

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.get("webhooks", use: self.list)
        group.put("webhooks/:webhookId", use: self.put)
        group.get("webhooks/:webhookId", use: self.get)
        group.delete("webhooks/:webhookId", use: self.delete)
        group.post("webhooks/:webhookId/secret/rotate", use: self.rotateSecret)
        group.get("webhooks/:webhookId/attempts", use: self.attempts)
        group.post("webhooks/:webhookId/replay", use: self.replay)
    }

    /// Creates (201) or replaces (200) a webhook. A new one delivers the events committed
    /// after this call; a replaced one keeps its position, and its new url, filter and secret
    /// apply from the next attempt.
    @Sendable func put(_ request: Request, context: ReceiptsRequestContext) async throws -> EditedResponse<PutWebhookResponse> {
        let principal = try context.requirePrincipal()
        let webhookId = try Validation.pathId("webhookId", in: context)
        try principal.requireTenantKey(for: "managing webhooks")
        let body = try await request.decode(as: PutWebhookRequest.self, context: context)
        guard let target = WebhookTarget(body.url) else {
            throw APIError.invalidRequest("url must be an http or https URL with a host, at most \(WebhookTarget.maximumLength) characters")
        }
        if let literal = WebhookAddressPolicy.literal(target.host), !self.addressPolicy.allows(literal) {
            throw APIError.invalidRequest(
                "url points at a loopback, private, link-local, multicast or unspecified address, which webhooks may not reach")
        }
        let events = try Self.events(body.events)
        let secret = try body.secret.map(Self.checkedSecret) ?? WebhookSecret.generated()
        // Where the hub stands: every event up to here committed before this request.
        let (position, history) = try await self.hub.readyPosition()
        let outcome = try await self.store.putWebhook(
            tenant: principal.tenantId, webhook: webhookId, url: target.url, events: events, secret: secret, position: position,
            history: history.currentId, maximumPerTenant: Self.maximumPerTenant)
        let created: Date
        let status: HTTPResponse.Status
        switch outcome {
        case .created(let date): (created, status) = (date, .created)
        case .replaced(let date): (created, status) = (date, .ok)
        case .limitReached: throw APIError.conflict("a tenant may have at most \(Self.maximumPerTenant) webhooks")
        case .historyChanged:
            // A failover this instance has not followed yet: nothing was written.
            throw APIError(.serviceUnavailable, .unavailable, "the database is switching over; try again")
        }
        self.dispatcher.webhooksChanged()
        return EditedResponse(
            status: status,
            response: PutWebhookResponse(id: webhookId, url: target.url, events: events, secret: secret, createdAt: created))
    }

    @Sendable func get(_ request: Request, context: ReceiptsRequestContext) async throws -> WebhookResponse {
        let principal = try context.requirePrincipal()
        let webhookId = try Validation.pathId("webhookId", in: context)
        try principal.requireTenantKey(for: "managing webhooks")
        guard let webhook = try await self.store.webhook(tenant: principal.tenantId, webhook: webhookId) else {
            throw APIError.notFound("no such webhook")
        }
        return WebhookResponse(webhook, history: self.hub.history)
    }

    @Sendable func list(_ request: Request, context: ReceiptsRequestContext) async throws -> WebhookListResponse {
        let principal = try context.requirePrincipal()
        try principal.requireTenantKey(for: "managing webhooks")
        return WebhookListResponse(try await self.store.webhooks(tenant: principal.tenantId), history: self.hub.history)
    }

    /// Gives a webhook a new generated secret; for `rotationOverlap` every delivery is signed
    /// with the old one too (`webhook-signature` carries both; `Receipts-Signature` the new
    /// one), so a receiver that knows either verifies every delivery meanwhile.
    @Sendable func rotateSecret(_ request: Request, context: ReceiptsRequestContext) async throws -> RotatedWebhookSecretResponse {
        let principal = try context.requirePrincipal()
        let webhookId = try Validation.pathId("webhookId", in: context)
        try principal.requireTenantKey(for: "managing webhooks")
        let secret = WebhookSecret.generated()
        guard let expires = try await self.store.rotateWebhookSecret(
            tenant: principal.tenantId, webhook: webhookId, secret: secret, overlap: Self.rotationOverlap)
        else { throw APIError.notFound("no such webhook") }
        return RotatedWebhookSecretResponse(secret: secret, previousExpiresAt: expires)
    }

    /// The webhook's newest attempts, newest first: `?limit=` 1–100, default 20 (the last 100
    /// are kept).
    @Sendable func attempts(_ request: Request, context: ReceiptsRequestContext) async throws -> WebhookAttemptsResponse {
        let principal = try context.requirePrincipal()
        let webhookId = try Validation.pathId("webhookId", in: context)
        try principal.requireTenantKey(for: "managing webhooks")
        let limit = try ViewQuery(request.uri.queryParameters).integer("limit", in: 1...100) ?? 20
        guard try await self.store.webhook(tenant: principal.tenantId, webhook: webhookId) != nil else {
            throw APIError.notFound("no such webhook")
        }
        let key = WebhookKey(tenant: principal.tenantId, webhook: webhookId)
        return WebhookAttemptsResponse(attempts: try await self.store.webhookAttempts(key, limit: limit).map(WebhookAttemptsResponse.Attempt.init))
    }

    /// Replays a webhook from a retained event of the tenant: 202, and every event after it
    /// goes out again, in order, with the webhook's usual guarantees (the instance delivering
    /// it starts again from there at its next lease renewal, within a few seconds; at once on
    /// this one). An id no longer retained is 409; an unknown one, or another tenant's, 400.
    @Sendable func replay(_ request: Request, context: ReceiptsRequestContext) async throws -> EditedResponse<WebhookResponse> {
        let principal = try context.requirePrincipal()
        let webhookId = try Validation.pathId("webhookId", in: context)
        try principal.requireTenantKey(for: "managing webhooks")
        let body = try await request.decode(as: ReplayWebhookRequest.self, context: context)
        let (_, history) = try await self.hub.readyPosition()
        let resolved = history.position(of: body.after)
        guard case .position(let position) = resolved else {
            // No webhook is 404 whatever `after` says, as for every other call on it.
            guard try await self.store.webhook(tenant: principal.tenantId, webhook: webhookId) != nil else {
                throw APIError.notFound("no such webhook")
            }
            if case .lost = resolved { throw APIError.conflict("after names an event a database failover lost: it is no longer retained") }
            throw APIError.invalidRequest("after is no event id of this service")
        }
        switch try await self.store.replayWebhook(tenant: principal.tenantId, webhook: webhookId, after: position, history: history.currentId) {
        case .replayed: break
        case .notFound: throw APIError.notFound("no such webhook")
        case .pruned: throw APIError.conflict("after names an event that is no longer retained")
        case .unknownEvent: throw APIError.invalidRequest("after names no event of this tenant")
        case .historyChanged: throw APIError(.serviceUnavailable, .unavailable, "the database is switching over; try again")
        }
        self.dispatcher.webhooksChanged()
        guard let webhook = try await self.store.webhook(tenant: principal.tenantId, webhook: webhookId) else {
            throw APIError.notFound("no such webhook")
        }
        return EditedResponse(status: .accepted, response: WebhookResponse(webhook, history: self.hub.history))
    }

    /// Deletes a webhook: deliveries stop within 5 s on every instance (at once on this one).
    @Sendable func delete(_ request: Request, context: ReceiptsRequestContext) async throws -> HTTPResponse.Status {
        let principal = try context.requirePrincipal()
        let webhookId = try Validation.pathId("webhookId", in: context)
        try principal.requireTenantKey(for: "managing webhooks")
        guard try await self.store.deleteWebhook(tenant: principal.tenantId, webhook: webhookId) else {
            throw APIError.notFound("no such webhook")
        }
        self.dispatcher.webhooksChanged()
        return .noContent
    }

    /// The filter: a non-empty list of known types without repeats; all of them when absent.
    static func events(_ events: [String]?) throws -> [String] {
        guard let events else { return WebhookEventTypes.byDefault }
        guard !events.isEmpty else { throw APIError.invalidRequest("events must name at least one event type") }
        guard Set(events).count == events.count else { throw APIError.invalidRequest("events must not repeat a type") }
        if let unknown = events.first(where: { !WebhookEventTypes.known.contains($0) }) {
            throw APIError.invalidRequest(
                "events has an unknown type \"\(unknown)\" (known: \(WebhookEventTypes.known.joined(separator: ", ")))")
        }
        return events
    }

    /// 16–128 characters (Unicode code points, as JSON Schema counts them), no NUL (which
    /// PostgreSQL's text cannot hold).
    static func checkedSecret(_ secret: String) throws -> String {
        guard Self.secretLengths.contains(secret.unicodeScalars.count), !secret.unicodeScalars.contains("\0") else {
            throw APIError.invalidRequest("secret must be 16-128 characters, without NUL")
        }
        return secret
    }

}
