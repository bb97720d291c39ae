import Foundation
import ReceiptsStore
import Testing

/// A replay counts a replay generation (sql/migrations/0021_webhook_replay.sql): the instance
/// that delivers the webhook, wherever the replay was asked, learns of it from its next claim
/// or attempt, and an acknowledgement of a batch it sent before the replay moves nothing.
/// Here with the store alone, so the acknowledgement surely comes after the replay (across
/// two services: WebhookFailoverTests).
@Suite("Webhook replay generations")
struct WebhookReplayGenerationTests {
    @Test("an acknowledgement of a batch sent before a replay moves nothing; its answer and the next claim carry the new generation")
    func acknowledgementOfABatchSentBeforeAReplay() async throws {
        try await ErasureLeaseTests.withStore { store in
            let start = try await store.newestEvent()
            let key = WebhookKey(tenant: "t", webhook: "hook")
            guard case .created = try await store.putWebhook(
                tenant: "t", webhook: "hook", url: "https://receiver.example/hook", events: ["message.created"],
                secret: "a-secret-of-16-or-more", position: start.id, history: start.history, maximumPerTenant: 10)
            else {
                Issue.record("the webhook was not created")
                return
            }
            for index in 0..<3 {
                _ = try await store.sendMessage(tenant: "t", chat: "g", id: "m\(index)", sender: "a", text: "\(index)")
            }
            let newest = try await store.newestEvent()
            let events = try await store.events(tenant: "t", after: start.id, through: newest.id, limit: 10).map(\.id)
            try #require(events.count == 3)

            // Instance one holds the webhook and has a batch of all three out.
            #expect(try await store.claimWebhooks(owner: "one", lease: .seconds(30), maximum: 10) == [key: 0])
            let begun = try #require(try await store.beginWebhookAttempt(key, owner: "one", lease: .seconds(30)))
            #expect(begun.replayGeneration == 0)
            // Another instance answers a replay from the first event.
            #expect(try await store.replayWebhook(tenant: "t", webhook: "hook", after: events[0], history: newest.history) == .replayed)

            // The receiver's answer to the batch comes: nothing moves.
            let stale = try #require(
                try await store.acknowledgeWebhookBatch(
                    key, owner: "one", through: events[2], history: newest.history, delivered: true, lease: .seconds(30), generation: 0))
            #expect(!stale.recorded)
            #expect(stale.position == events[0])
            #expect(stale.replayGeneration == 1)
            #expect(try await store.webhook(tenant: "t", webhook: "hook")?.position == events[0])

            // The holder's next claim says it was replayed; at the new generation it moves on.
            #expect(try await store.claimWebhooks(owner: "one", lease: .seconds(30), maximum: 10) == [key: 1])
            let next = try #require(
                try await store.acknowledgeWebhookBatch(
                    key, owner: "one", through: events[1], history: newest.history, delivered: true, lease: .seconds(30), generation: 1))
            #expect(next.recorded)
            #expect(next.position == events[1])
        }
    }
}
