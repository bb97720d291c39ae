import DequeModule
import Foundation
import ReceiptsStore

/// Every decision of a webhook delivery's attempts, pure: what the delivery does with the
/// webhook's settings just read (restart, wait, skip, send), with a receiver's answer (move
/// on, disable, try again later), and which events make the next batch. No I/O, no clock, no
/// randomness: the shell (`WebhookDelivery.DeliveryLoop.deliverNextBatch`) reads the settings,
/// the time and the backoff's jittered delay, performs what it is told and feeds the answers
/// back. `WebhookAttemptDecisionsTests` names each rule.
enum WebhookAttemptDecisions {
    /// Where the delivery stands when it considers an attempt.
    struct Standing: Sendable {
        /// The replay generation it runs at (`WebhookAttemptSettings.replayGeneration`).
        var generation: Int
        /// The position acknowledged in the database, as this delivery knows it.
        var acknowledged: Int64
        /// The event history `acknowledged` is a position of.
        var acknowledgedHistory: String
    }

    /// The next batch: up to `WebhookDelivery.maximumBatch` entries of the types the webhook
    /// takes, how many of the pending entries it covers (skipped ones included), and the
    /// position it moves to once acknowledged.
    struct Batch {
        var entries: [WebhookDelivery.Entry]
        var consumed: Int
        var through: Int64
    }

    /// The next batch of `pending` for the filter `events` (`resync.required` always goes):
    /// when everything pending is in it or skipped, it moves the position to `received`, past
    /// the events at the end that were not for the webhook.
    static func batch(of pending: Deque<WebhookDelivery.Entry>, for events: [String], acknowledged: Int64, received: Int64) -> Batch {
        var batch = Batch(entries: [], consumed: 0, through: acknowledged)
        for entry in pending {
            if entry.type == WebhookEventTypes.resyncRequired || events.contains(entry.type) {
                if batch.entries.count == WebhookDelivery.maximumBatch { break }
                batch.entries.append(entry)
            }
            batch.through = entry.id
            batch.consumed += 1
        }
        if batch.consumed == pending.count { batch.through = max(batch.through, received) }
        return batch
    }

    /// What to do with the webhook's settings, read as an attempt begins.
    enum BeforeAttempt: Equatable {
        /// Start again from `position` of `history`, at replay `generation`: the webhook was
        /// replayed, or another instance delivered meanwhile (this one's lease lapsed).
        case restart(from: Int64, in: String, generation: Int)
        /// Ask whether retention deleted the event of this id (`pruned`), then decide again.
        case checkPruned(Int64)
        /// The backoff of a failure (recorded just now, or by the instance this one took over
        /// from) holds until then.
        case wait(until: Date)
        /// Nothing pending is for the webhook: move the position past it without sending.
        case skip(through: Int64, consumed: Int)
        /// Send the batch.
        case send
    }

    /// The rules, in order:
    /// 1. a replay since (another generation) restarts from its position;
    /// 2. a position further on, or in another event history, than this delivery's means
    ///    another instance delivered meanwhile: resume after it;
    /// 3. after failures, an oldest pending event that retention deleted (`pruned`; asked
    ///    for when nil) restarts from the acknowledged position, and the hub answers
    ///    `resync.required` there: the receiver was down for longer than the log keeps events;
    /// 4. a failure's backoff holds until its time;
    /// 5. a batch with nothing for the webhook is skipped; any other is sent.
    static func beforeAttempt(
        _ settings: WebhookAttemptSettings, standing: Standing, oldestPending: WebhookDelivery.Entry?, batch: Batch, now: Date,
        pruned: Bool?
    ) -> BeforeAttempt {
        if settings.replayGeneration != standing.generation {
            return .restart(from: settings.position, in: settings.positionHistory, generation: settings.replayGeneration)
        }
        if settings.positionHistory != standing.acknowledgedHistory || settings.position > standing.acknowledged {
            return .restart(from: settings.position, in: settings.positionHistory, generation: standing.generation)
        }
        if settings.failures > 0, let oldest = oldestPending, oldest.type != WebhookEventTypes.resyncRequired {
            switch pruned {
            case nil: return .checkPruned(oldest.id)
            case true?: return .restart(from: standing.acknowledged, in: standing.acknowledgedHistory, generation: standing.generation)
            case false?: break
            }
        }
        if let due = settings.nextAttemptAt, due > now { return .wait(until: due) }
        if batch.entries.isEmpty { return .skip(through: batch.through, consumed: batch.consumed) }
        return .send
    }

    /// What to do with a receiver's answer to a batch.
    enum AfterSend: Equatable {
        /// A 2xx: record the position past the batch.
        case acknowledge
        /// 410 Gone: disable the webhook (and give its lease up) until a `PUT` enables it
        /// again, at its position.
        case disable(String)
        /// Any other failure: record it, and send the same events again after `delay`.
        case retry(after: Duration, String)
    }

    /// A 429 or 503 with `Retry-After` says when to try again; otherwise `backoff`, the
    /// backoff's delay after this failure (`WebhookBackoff.delay(afterFailures:)`, failures so
    /// far + 1).
    static func afterSend(_ outcome: WebhookSender.Outcome, backoff: Duration) -> AfterSend {
        switch outcome {
        case .acknowledged: .acknowledge
        case .failed(.gone, let message, _): .disable(message)
        case .failed(_, let message, let retryAfter): .retry(after: retryAfter ?? backoff, message)
        }
    }
}
