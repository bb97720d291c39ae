import DequeModule
import Foundation
@testable import ReceiptsServer
import ReceiptsStore
import Testing

/// The decisions of a webhook delivery's attempts, each rule by name, without a database or a
/// receiver (the shell and the whole path: `WebhookTests`, `WebhookReplayTests`,
/// `WebhookFailoverTests`).
@Suite("Webhook attempt decisions")
struct WebhookAttemptDecisionsTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let standing = WebhookAttemptDecisions.Standing(generation: 2, acknowledged: 100, acknowledgedHistory: "h1")

    func settings(
        position: Int64 = 100, history: String = "h1", failures: Int = 0, nextAttemptAt: Date? = nil, generation: Int = 2,
        events: [String] = ["receipt.read"]
    ) -> WebhookAttemptSettings {
        WebhookAttemptSettings(
            url: "https://hooks.example.com/r", events: events, secret: "whsec_x", position: position, positionHistory: history,
            committedBefore: TransactionSnapshot(lowestRunning: 1, firstUnassigned: 1, running: []), failures: failures,
            nextAttemptAt: nextAttemptAt, replayGeneration: generation)
    }

    func entry(_ id: Int64, _ type: String = "receipt.read") -> WebhookDelivery.Entry {
        WebhookDelivery.Entry(id: id, eventId: "\(id)", type: type, json: #"{"id":"\#(id)"}"#)
    }

    func decide(
        _ settings: WebhookAttemptSettings, pending: [WebhookDelivery.Entry] = [], pruned: Bool? = nil
    ) -> WebhookAttemptDecisions.BeforeAttempt {
        let pending = Deque(pending.isEmpty ? [self.entry(101)] : pending)
        let batch = WebhookAttemptDecisions.batch(of: pending, for: settings.events, acknowledged: self.standing.acknowledged, received: pending.last!.id)
        return WebhookAttemptDecisions.beforeAttempt(
            settings, standing: self.standing, oldestPending: pending.first, batch: batch, now: self.now, pruned: pruned)
    }

    @Test("a replay restarts from its position, at its generation")
    func replayRestarts() {
        #expect(self.decide(self.settings(position: 40, generation: 3)) == .restart(from: 40, in: "h1", generation: 3))
    }

    @Test("a position further on than this delivery's means another instance delivered: resume after it")
    func takenOverResumesAfterIt() {
        #expect(self.decide(self.settings(position: 130)) == .restart(from: 130, in: "h1", generation: 2))
    }

    @Test("a position in another event history (a failover) resumes there, even if lower")
    func otherHistoryResumesThere() {
        #expect(self.decide(self.settings(position: 90, history: "h2")) == .restart(from: 90, in: "h2", generation: 2))
    }

    @Test("after failures, the oldest pending event is checked against retention: deleted, the delivery restarts from its acknowledged position")
    func prunedWhileFailingRestarts() {
        let failing = self.settings(failures: 3)
        #expect(self.decide(failing) == .checkPruned(101))
        #expect(self.decide(failing, pruned: true) == .restart(from: 100, in: "h1", generation: 2))
        #expect(self.decide(failing, pruned: false) == .send)
    }

    @Test("a resync.required pending first is not checked against retention: it is what the receiver must get")
    func resyncIsNotChecked() {
        let pending = [self.entry(101, WebhookEventTypes.resyncRequired), self.entry(102)]
        #expect(self.decide(self.settings(failures: 3), pending: pending) == .send)
    }

    @Test("without failures nothing is checked against retention")
    func noFailuresNoCheck() {
        #expect(self.decide(self.settings()) == .send)
    }

    @Test("a failure's backoff holds until its time, then the batch goes")
    func backoffHolds() {
        let due = self.now.addingTimeInterval(2)
        #expect(self.decide(self.settings(failures: 1, nextAttemptAt: due), pruned: false) == .wait(until: due))
        #expect(self.decide(self.settings(failures: 1, nextAttemptAt: self.now.addingTimeInterval(-1)), pruned: false) == .send)
    }

    @Test("a batch with nothing the webhook takes is skipped: the position moves past it without a request")
    func unwantedEventsSkipped() {
        let pending = [self.entry(101, "message.created"), self.entry(102, "unread.changed")]
        #expect(self.decide(self.settings(), pending: pending) == .skip(through: 102, consumed: 2))
    }

    @Test("a batch takes at most 100 entries of the types the webhook takes, resync.required always, and moves past skipped ones")
    func batchFormation() {
        var pending: Deque<WebhookDelivery.Entry> = [self.entry(101, WebhookEventTypes.resyncRequired)]
        for id in Int64(102)...Int64(400) { pending.append(self.entry(id, id.isMultiple(of: 2) ? "receipt.read" : "message.created")) }
        let batch = WebhookAttemptDecisions.batch(of: pending, for: ["receipt.read"], acknowledged: 100, received: 400)
        #expect(batch.entries.count == 100)
        #expect(batch.entries.first?.type == WebhookEventTypes.resyncRequired)
        #expect(batch.entries.dropFirst().allSatisfy { $0.type == "receipt.read" })
        // The 100th entry is event 298; the position moves past 299, which the webhook skips,
        // and stops before 300, which did not fit.
        #expect(batch.through == 299)
        #expect(batch.consumed == 199)

        let all = WebhookAttemptDecisions.batch(of: [self.entry(101), self.entry(102, "message.created")], for: ["receipt.read"], acknowledged: 100, received: 110)
        #expect(all.through == 110)
        #expect(all.consumed == 2)
    }

    @Test("a 2xx acknowledges; a 410 disables until a PUT; any other failure retries after Retry-After, else after the backoff")
    func afterSend() {
        #expect(WebhookAttemptDecisions.afterSend(.acknowledged, backoff: .seconds(4)) == .acknowledge)
        #expect(WebhookAttemptDecisions.afterSend(.failed(.gone, "410 Gone"), backoff: .seconds(4)) == .disable("410 Gone"))
        #expect(WebhookAttemptDecisions.afterSend(.failed(.status, "503", retryAfter: .seconds(30)), backoff: .seconds(4))
            == .retry(after: .seconds(30), "503"))
        #expect(WebhookAttemptDecisions.afterSend(.failed(.status, "500"), backoff: .seconds(4)) == .retry(after: .seconds(4), "500"))
    }
}
