import CoreMetrics
import DequeModule
import Foundation
import Logging
import NIOHTTP1
import ReceiptsCore
import ReceiptsLive
import ReceiptsStore
import Tracing

/// Delivers one webhook while this instance holds its lease: batches of its tenant's events,
/// in stream order, one at a time, each until the receiver acknowledges it.
///
/// The events come from the event hub, as a subscription with the tenant key's view (the
/// same ids and JSON as the tenant key's stream, and the same rule: the hub never moves past
/// an event that may still commit), starting after the webhook's position in the database;
/// the hub reads from the log what it no longer holds in memory, and answers
/// `resync.required` when retention deleted the next event. A batch is up to 100 events of
/// the types the webhook takes; after a 2xx the position moves past it in the database
/// (`acknowledgeWebhookBatch`, which fails if another instance took the lease: then this one
/// stops), and only then does the next batch go out. A failed attempt is recorded and tried
/// again after `WebhookBackoff`'s delay, with the same events.
///
/// Before each attempt the lease is renewed and the webhook read again
/// (`beginWebhookAttempt`, or the acknowledgement of the batch before when the next one goes
/// out right after it): a `PUT`'s new url, secret or filter applies from the next attempt,
/// and a deleted webhook stops the delivery. The dispatcher stops it too (`stop()`), within
/// a claim interval, when its lease is gone.
final class WebhookDelivery: Sendable {
    /// Events per delivery, at most (docs/api.md, "Webhooks").
    static let maximumBatch = 100
    /// Skipped events' position is written at most this often (a filter that takes few types
    /// must not cost a write per event it skips; after a restart at most this much is read
    /// again and skipped again).
    static let skipWriteInterval = Duration.seconds(1)
    /// The lag metric is read from the database at most this often.
    static let lagRefreshInterval = Duration.seconds(1)
    /// The pause after the database or the hub could not be reached.
    static let unavailablePause = Duration.seconds(1)
    /// Under a sustained stream of events, attempts start at least this far apart: the next
    /// batch waits for the rest of this time, gathering what arrives meanwhile, so that each
    /// round trip (a POST, its signature, the acknowledgement's statement, the receiver's
    /// work) carries many events: at most 40 a second, each with up to `maximumBatch`
    /// events, instead of hundreds of a handful each, whose fixed costs would take a large
    /// share of the cores the write path needs (BENCHMARKS.md, webhooks). Events then reach
    /// the receiver up to this much later than they would one by one.
    static let busyAttemptSpacing = Duration.milliseconds(25)
    /// A batch of at least this many events means the events come faster than batches go out
    /// (a round trip on loopback takes a few milliseconds): only after such a batch does the
    /// next one wait for `busyAttemptSpacing`. A receiver of a few events at a time, even in
    /// quick succession, gets each batch at once.
    static let busyBatch = 10

    struct Settings: Sendable {
        var owner: String
        var lease: Duration
        var backoff: WebhookBackoff
        var attemptTimeout: Duration
        var addressPolicy: WebhookAddressPolicy
    }

    let key: WebhookKey
    /// The replay generation the webhook had when its lease was claimed: the dispatcher starts
    /// the delivery again when a replay moved it on.
    let generation: Int
    private let store: ReceiptsStore
    private let hub: EventHub
    private let settings: Settings
    private let metrics: WebhookMetrics
    private let logger: Logger
    private let stopRequests: AsyncStream<Void>
    private let requestStop: AsyncStream<Void>.Continuation

    init(key: WebhookKey, generation: Int, store: ReceiptsStore, hub: EventHub, settings: Settings, metrics: WebhookMetrics, logger: Logger) {
        self.key = key
        self.generation = generation
        self.store = store
        self.hub = hub
        self.settings = settings
        self.metrics = metrics
        var logger = logger
        logger[metadataKey: "receipts.tenant_id"] = "\(key.tenant)"
        logger[metadataKey: "receipts.webhook_id"] = "\(key.webhook)"
        self.logger = logger
        (self.stopRequests, self.requestStop) = AsyncStream.makeStream()
    }

    /// Ends the delivery: an attempt under way is abandoned (its batch goes out again from
    /// the position in the database, by whoever holds the lease next).
    func stop() {
        self.requestStop.finish()
    }

    /// Delivers until stopped, cancelled, or the lease or the webhook is gone.
    func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var loop = DeliveryLoop(delivery: self)
                await loop.run()
                await loop.finish()
            }
            group.addTask {
                for await _ in self.stopRequests {}
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// One entry of a batch: an event as the stream carries it, or `resync.required`.
    struct Entry {
        /// Its position (in `DeliveryLoop.receivedHistory`).
        let id: Int64
        /// Its `id` as the receiver sees it (`EventHistory.eventId(_:)`).
        let eventId: String
        let type: String
        let json: String
    }

    /// The state of one delivery, owned by its task.
    struct DeliveryLoop {
        let delivery: WebhookDelivery
        let sender: WebhookSender
        let lag: Gauge
        /// The replay generation the delivery runs at (`WebhookAttemptSettings.replayGeneration`):
        /// its acknowledgements move nothing once the webhook was replayed again.
        var generation = 0
        /// The webhook's position in the database: everything up to it is acknowledged.
        var acknowledged: Int64 = 0
        /// The event history `acknowledged` is a position of (`EventHistory`).
        var acknowledgedHistory = ""
        /// The event history of what the hub gives the subscription: the positions of
        /// `pending`, `received` and `sentThrough`, and the one acknowledgements are written in.
        var receivedHistory = ""
        /// The newest position sent to the receiver in `receivedHistory` (acknowledged or not):
        /// after a failover that lost it, the receiver may hold events the database no longer
        /// has, and is told `resync.required`.
        var sentThrough: Int64 = 0
        var subscription: EventSubscription?
        var wakeups: AsyncStream<Void>.Iterator?
        /// Events received from the hub and not yet acknowledged, oldest first.
        var pending: Deque<Entry> = []
        /// The subscription's position: every event up to it is in `pending` or was skipped.
        var received: Int64 = 0
        /// The hub may have more right away (its last batch was not the end).
        var hubHasMore = false
        var lastSkipWrite = ContinuousClock.now
        var lastLagRefresh: ContinuousClock.Instant?
        /// What the last acknowledgement read of the webhook (it renews the lease and returns
        /// the settings, as `beginWebhookAttempt` does): the next attempt uses it instead of
        /// another round trip when it starts without waiting in between (the next batch was
        /// already there), as late a read as a separate call would make. Dropped before any wait.
        var settingsOfLastAcknowledgement: WebhookAttemptSettings?
        /// When the last attempt started, and how many events it carried (`busyAttemptSpacing`).
        var lastAttempt: (started: ContinuousClock.Instant, events: Int)?

        init(delivery: WebhookDelivery) {
            self.delivery = delivery
            self.sender = WebhookSender(
                policy: delivery.settings.addressPolicy, timeout: delivery.settings.attemptTimeout, logger: delivery.logger)
            self.lag = delivery.metrics.lagGauge(for: delivery.key.description)
        }

        var store: ReceiptsStore { self.delivery.store }
        var key: WebhookKey { self.delivery.key }
        var owner: String { self.delivery.settings.owner }
        var logger: Logger { self.delivery.logger }

        mutating func finish() async {
            self.unsubscribe()
            await self.sender.shutdown()
            self.lag.destroy()
        }

        mutating func run() async {
            guard var current = await self.begin() else { return }
            self.generation = current.replayGeneration
            self.restart(from: current.position, in: current.positionHistory)
            while !Task.isCancelled {
                if self.pending.count < WebhookDelivery.maximumBatch, self.pending.isEmpty || self.hubHasMore {
                    guard await self.receive(current) else { continue }
                }
                if !self.pending.isEmpty, self.pending.count < WebhookDelivery.maximumBatch, let last = self.lastAttempt,
                    last.events >= WebhookDelivery.busyBatch, last.started + WebhookDelivery.busyAttemptSpacing > .now
                {
                    // Events keep coming: gather what arrives until the spacing has passed. The
                    // acknowledgement's read of the webhook is then no longer the latest.
                    try? await Task.sleep(until: last.started + WebhookDelivery.busyAttemptSpacing)
                    self.settingsOfLastAcknowledgement = nil
                    _ = await self.receive(current)
                }
                let batch = self.batch(for: current.events)
                if batch.entries.isEmpty {
                    guard batch.through > self.acknowledged else {
                        if !self.hubHasMore { await self.waitForEvents() }
                        continue
                    }
                    self.pending.removeFirst(batch.consumed)
                    guard await self.skip(through: batch.through) else { return }
                    continue
                }
                guard let next = await self.deliverNextBatch(settings: current) else { return }
                current = next
            }
        }

        /// Renews the lease and reads the webhook; nil when it is gone or another instance
        /// holds it (or the task was cancelled).
        mutating func begin() async -> WebhookAttemptSettings? {
            while !Task.isCancelled {
                do {
                    return try await self.store.beginWebhookAttempt(
                        self.key, owner: self.owner, lease: self.delivery.settings.lease)
                } catch {
                    self.logger.notice("webhook: the database is unavailable", metadata: ["error": "\(error)"])
                    try? await Task.sleep(for: WebhookDelivery.unavailablePause)
                }
            }
            return nil
        }

        /// Takes the hub's next events into `pending`; false when nothing came (a pause was
        /// made where needed) and the loop should look again.
        mutating func receive(_ current: WebhookAttemptSettings) async -> Bool {
            do {
                let subscription = try await self.subscribed(committedBefore: current.committedBefore)
                let batch = try await self.delivery.hub.nextEvents(for: subscription)
                if let resync = batch.resync {
                    self.pending.append(
                        Entry(id: resync.position, eventId: resync.eventId, type: WebhookEventTypes.resyncRequired, json: resync.json))
                }
                for event in batch.events {
                    self.pending.append(Entry(id: event.id, eventId: event.eventId, type: event.type, json: event.json))
                }
                self.received = self.delivery.hub.position(of: subscription) ?? self.received
                self.hubHasMore = !batch.isUpToDate
                return true
            } catch EventHub.CloseReason.historyChanged {
                self.followHistoryChange()
                return false
            } catch let reason as EventHub.CloseReason {
                // Too far behind while a batch was retried (or the hub stops): start again
                // from the acknowledged position, reading from the log.
                self.logger.debug("webhook: the hub closed the subscription", metadata: ["reason": "\(reason)"])
                self.restart(from: self.acknowledged, in: self.acknowledgedHistory)
                if reason == .shuttingDown { try? await Task.sleep(for: WebhookDelivery.unavailablePause) }
                self.settingsOfLastAcknowledgement = nil
                return false
            } catch {
                self.logger.notice("webhook: events could not be read", metadata: ["error": "\(error)"])
                self.restart(from: self.acknowledged, in: self.acknowledgedHistory)
                try? await Task.sleep(for: WebhookDelivery.unavailablePause)
                self.settingsOfLastAcknowledgement = nil
                return false
            }
        }

        /// The subscription, made from the acknowledged position when there is none.
        mutating func subscribed(committedBefore: TransactionSnapshot) async throws -> EventSubscription {
            if let subscription { return subscription }
            let start = try await self.delivery.hub.startDelivery(
                tenant: self.key.tenant, after: self.acknowledged, positionHistory: self.acknowledgedHistory,
                sent: self.receivedHistory.isEmpty ? nil : (self.sentThrough, self.receivedHistory), committedBefore: committedBefore)
            let (subscription, wakeups) = self.delivery.hub.subscribe(.tenant(self.key.tenant), from: start, closesOnHistoryChange: true)
            self.subscription = subscription
            self.wakeups = wakeups.makeAsyncIterator()
            self.sentThrough = start.history == self.receivedHistory ? max(self.sentThrough, start.position) : start.position
            self.receivedHistory = start.history
            self.received = start.position
            if let resync = subscription.resync {
                // The position is no longer retained, or of a history the database lost: the
                // next batch starts with resync.required (`acknowledged` stays as it is until
                // that batch is acknowledged, so a restart before says it again).
                self.pending.append(
                    Entry(id: resync.position, eventId: resync.eventId, type: WebhookEventTypes.resyncRequired, json: resync.json))
            } else {
                // The same position in the history the hub is in.
                self.acknowledged = start.position
                self.acknowledgedHistory = start.history
            }
            return subscription
        }

        /// The database went on to another event history (a failover or a restore) while this
        /// delivery ran: everything received is dropped, and the delivery starts again from its
        /// acknowledged position, which `EventHub.startDelivery` resolves in the new history
        /// (with what was sent: a receiver that may hold events the new history did not keep
        /// is told `resync.required`).
        mutating func followHistoryChange() {
            self.logger.notice("webhook: the database went on to another event history; delivery starts again from its position")
            self.restart(from: self.acknowledged, in: self.acknowledgedHistory)
            self.settingsOfLastAcknowledgement = nil
        }

        /// Waits until the hub has something new (the subscription's wake-ups), then reads
        /// the lag metric again.
        mutating func waitForEvents() async {
            self.settingsOfLastAcknowledgement = nil
            await self.refreshLag(force: true)
            if await self.wakeups?.next() == nil {
                // Closed by the hub: the next read says why.
                self.wakeups = nil
                if self.subscription == nil { try? await Task.sleep(for: WebhookDelivery.unavailablePause) }
            }
        }

        /// Drops what was received and starts again from `position` of event history `history`
        /// (what was sent stays known: `subscribed(committedBefore:)`).
        mutating func restart(from position: Int64, in history: String) {
            self.unsubscribe()
            self.pending.removeAll()
            self.acknowledged = position
            self.acknowledgedHistory = history
            self.received = position
            self.hubHasMore = false
        }

        mutating func unsubscribe() {
            self.subscription?.cancel()
            self.subscription = nil
            self.wakeups = nil
        }

        /// The next batch for the filter `events` (`WebhookAttemptDecisions.batch(of:for:acknowledged:received:)`).
        func batch(for events: [String]) -> WebhookAttemptDecisions.Batch {
            WebhookAttemptDecisions.batch(of: self.pending, for: events, acknowledged: self.acknowledged, received: self.received)
        }

        /// Moves the position past events the filter skips, in the database at most once per
        /// `skipWriteInterval` (an acknowledgement carries it anyway). False when the lease
        /// or the webhook is gone.
        mutating func skip(through position: Int64) async -> Bool {
            self.acknowledged = position
            self.acknowledgedHistory = self.receivedHistory
            guard ContinuousClock.now - self.lastSkipWrite >= WebhookDelivery.skipWriteInterval else { return true }
            self.lastSkipWrite = .now
            do {
                let settings = try await self.store.acknowledgeWebhookBatch(
                    self.key, owner: self.owner, through: position, history: self.receivedHistory, delivered: false,
                    lease: self.delivery.settings.lease, generation: self.generation)
                if settings?.recorded == false {
                    self.followHistoryChange()
                    return true
                }
                self.settingsOfLastAcknowledgement = settings
                return settings != nil
            } catch {
                return true  // written with the next acknowledgement
            }
        }

        /// Sends the next batch of `pending` until the receiver acknowledges it (formed again for
        /// each attempt: a PUT may have changed the filter), as `WebhookAttemptDecisions` decides;
        /// the settings for the batch after, or nil when the delivery must stop (lease or webhook
        /// gone, or cancelled).
        mutating func deliverNextBatch(settings: WebhookAttemptSettings) async -> WebhookAttemptSettings? {
            var current = settings
            while !Task.isCancelled {
                if let settings = self.settingsOfLastAcknowledgement {
                    self.settingsOfLastAcknowledgement = nil
                    current = settings
                } else {
                    guard let settings = await self.begin() else { return nil }
                    current = settings
                }
                let batch = self.batch(for: current.events)
                var decision = self.beforeAttempt(current, batch: batch, pruned: nil)
                if case .checkPruned(let id) = decision { decision = self.beforeAttempt(current, batch: batch, pruned: await self.wasPruned(id)) }
                switch decision {
                case .restart(let position, let history, let generation):
                    self.generation = generation
                    self.restart(from: position, in: history)
                    return current
                case .checkPruned:
                    continue  // not after an answer: `beforeAttempt` asks once
                case .wait(let due):
                    try? await Task.sleep(for: min(.milliseconds(Int64(due.timeIntervalSinceNow * 1000) + 1), self.delivery.settings.backoff.maximum))
                case .skip(let through, let consumed):
                    self.pending.removeFirst(consumed)
                    return await self.skip(through: through) ? current : nil
                case .send:
                    guard let target = WebhookTarget(current.url) else {
                        self.logger.error("webhook: the stored url is not valid")
                        return nil
                    }
                    let (outcome, events, duration) = await self.send(batch, settings: current, to: target)
                    guard !Task.isCancelled else { return nil }
                    let backoff = self.delivery.settings.backoff.delay(afterFailures: current.failures + 1)
                    switch WebhookAttemptDecisions.afterSend(outcome, backoff: backoff) {
                    case .acknowledge:
                        self.delivery.metrics.recordAttempt(outcome: "delivered", events: events, duration: duration)
                        switch await self.acknowledge(through: batch.through) {
                        case .unavailable: continue
                        case .lost: return nil
                        case .historyChanged(let settings):
                            self.followHistoryChange()
                            return settings
                        case .recorded(let settings):
                            await self.acknowledged(batch, settings: settings)
                            return settings
                        }
                    case .disable(let message):
                        self.delivery.metrics.recordAttempt(outcome: WebhookSender.Failure.gone.rawValue, events: events, duration: duration)
                        await self.disable(message)
                        return nil
                    case .retry(let delay, let message):
                        if case .failed(let failure, _, _) = outcome {
                            self.delivery.metrics.recordAttempt(outcome: failure.rawValue, events: events, duration: duration)
                        }
                        guard await self.recordFailure(message, retryIn: delay) else { return nil }
                        try? await Task.sleep(for: delay)
                    }
                }
            }
            return nil
        }

        /// `WebhookAttemptDecisions.beforeAttempt` where this delivery stands.
        func beforeAttempt(_ settings: WebhookAttemptSettings, batch: WebhookAttemptDecisions.Batch, pruned: Bool?) -> WebhookAttemptDecisions.BeforeAttempt {
            WebhookAttemptDecisions.beforeAttempt(
                settings,
                standing: .init(generation: self.generation, acknowledged: self.acknowledged, acknowledgedHistory: self.acknowledgedHistory),
                oldestPending: self.pending.first, batch: batch, now: Date(), pruned: pruned)
        }

        /// Sends `batch` (not empty) once and logs the attempt; what came of it, with how many
        /// events it carried and how long it took.
        mutating func send(
            _ batch: WebhookAttemptDecisions.Batch, settings: WebhookAttemptSettings, to target: WebhookTarget
        ) async -> (WebhookSender.Outcome, events: Int, duration: Duration) {
            let request = WebhookBatchRequest(
                webhook: self.key.webhook, entries: batch.entries, settings: settings, replay: self.generation,
                timestamp: Int64(Date().timeIntervalSince1970))
            // When tracing is on: the attempt's span continues the trace of the batch that
            // wrote its first event, and the receiver gets it as `traceparent` (the HTTP
            // client's own span, under this one, puts it in the request's headers).
            let span = await self.attemptSpan(for: batch)
            let started = ContinuousClock.now
            let attemptedAt = Date()
            self.lastAttempt = (started, batch.entries.count)
            self.sentThrough = max(self.sentThrough, batch.through)
            let sender = self.sender
            let outcome = await ServiceContext.$current.withValue(span?.context ?? ServiceContext.current) {
                await sender.send(request.body, headers: request.headers, to: target)
            }
            let duration = ContinuousClock.now - started
            if let span {
                span.attributes["http.response.status_code"] = self.sender.lastStatus
                if case .failed(let failure, let message, _) = outcome {
                    span.attributes["receipts.webhook.outcome"] = failure.rawValue
                    span.setStatus(SpanStatus(code: .error, message: message))
                } else {
                    span.attributes["receipts.webhook.outcome"] = "delivered"
                }
                span.end()
            }
            if !Task.isCancelled {
                await self.log(
                    WebhookAttempt(
                        messageId: request.id, firstEventId: batch.entries[0].eventId, lastEventId: batch.entries[batch.entries.count - 1].eventId,
                        events: batch.entries.count, attemptedAt: attemptedAt, status: self.sender.lastStatus,
                        durationMilliseconds: Int(duration / .milliseconds(1)),
                        error: { if case .failed(_, let message, _) = outcome { message } else { nil } }()))
            }
            return (outcome, batch.entries.count, duration)
        }

        /// The span of an attempt at `batch`, when tracing is on: child of the span of the batch
        /// that wrote its first traced event (`receipts.events.trace_parent`), linked to the
        /// others'; a new trace when none of its events has one.
        func attemptSpan(for batch: WebhookAttemptDecisions.Batch) async -> (any Span)? {
            guard ReceiptsTracing.isOn else { return nil }
            let ids = batch.entries.map(\.id)
            let parents = (try? await self.store.eventTraceParents(tenant: self.key.tenant, events: ids)) ?? [:]
            var seen = Set<String>()
            let traces = ids.compactMap { parents[$0] }.filter { seen.insert($0).inserted }.map(ReceiptsTracing.context(continuing:))
            let span = InstrumentationSystem.tracer.startSpan("receipts.webhook.delivery", context: traces.first ?? .topLevel, ofKind: .client)
            for other in traces.dropFirst() { span.addLink(SpanLink(context: other, attributes: [:])) }
            span.attributes["receipts.webhook.id"] = self.key.webhook
            span.attributes["receipts.webhook.events"] = batch.entries.count
            return span
        }

        /// The receiver acknowledged `batch` and its position is recorded: it leaves `pending`.
        mutating func acknowledged(_ batch: WebhookAttemptDecisions.Batch, settings: WebhookAttemptSettings) async {
            self.pending.removeFirst(batch.consumed)
            self.acknowledged = batch.through
            self.acknowledgedHistory = self.receivedHistory
            self.lastSkipWrite = .now
            self.settingsOfLastAcknowledgement = settings
            await self.refreshLag(force: false)
        }

        /// The receiver answered 410 Gone: disabled (and its lease given up) until a PUT enables
        /// it again, at its position.
        func disable(_ message: String) async {
            self.logger.notice("webhook: the receiver answered 410 Gone; disabled until a PUT enables it")
            do {
                try await self.store.disableWebhook(self.key, owner: self.owner, error: message)
            } catch {
                self.logger.notice("webhook: disabling it could not be recorded", metadata: ["error": "\(error)"])
            }
        }

        /// Records a failed attempt, the next one due after `delay`; false when the lease or the
        /// webhook is gone (a failure to record it is logged, and the delivery goes on).
        mutating func recordFailure(_ message: String, retryIn delay: Duration) async -> Bool {
            self.logger.info("webhook: delivery failed; trying again later", metadata: ["error": "\(message)", "receipts.retry_in": "\(delay)"])
            do {
                guard try await self.store.recordWebhookFailure(self.key, owner: self.owner, error: message, retryAfter: delay) != nil else {
                    return false
                }
            } catch {
                self.logger.notice("webhook: the failure could not be recorded", metadata: ["error": "\(error)"])
            }
            await self.refreshLag(force: false)
            return true
        }

        /// Adds an attempt to the webhook's log; a failure to record it is logged, and
        /// delivery goes on (the log explains, it decides nothing).
        func log(_ attempt: WebhookAttempt) async {
            do {
                try await self.store.recordWebhookAttempt(self.key, attempt)
            } catch {
                self.logger.notice("webhook: the attempt could not be logged", metadata: ["error": "\(error)"])
            }
        }

        /// What recording an acknowledged batch came to.
        enum Acknowledgement {
            /// The position moved; the settings for the next attempt.
            case recorded(WebhookAttemptSettings)
            /// The lease or the webhook is gone: nothing moved.
            case lost
            /// The database went on to another event history since the events were read (a
            /// failover): nothing moved; the settings for the next attempt.
            case historyChanged(WebhookAttemptSettings)
            /// The database could not be reached for 5 s: the batch is sent again (at least once).
            case unavailable
        }

        mutating func acknowledge(through position: Int64) async -> Acknowledgement {
            for _ in 0..<5 {
                do {
                    let settings = try await self.store.acknowledgeWebhookBatch(
                        self.key, owner: self.owner, through: position, history: self.receivedHistory, delivered: true,
                        lease: self.delivery.settings.lease, generation: self.generation)
                    guard let settings else { return .lost }
                    return settings.recorded ? .recorded(settings) : .historyChanged(settings)
                } catch {
                    self.logger.notice("webhook: the acknowledgement could not be recorded", metadata: ["error": "\(error)"])
                    try? await Task.sleep(for: WebhookDelivery.unavailablePause)
                    if Task.isCancelled { return .unavailable }
                }
            }
            return .unavailable
        }

        /// Whether retention deleted the tenant's events after the acknowledged position (the
        /// event `id` is among them): the batch can no longer be delivered as it was.
        func wasPruned(_ id: Int64) async -> Bool {
            guard let position = try? await self.store.eventLogPosition(tenant: self.key.tenant) else { return false }
            return position.prunedThrough >= id
        }

        /// Reads the webhook's pending events into the lag metric, at most once per
        /// `lagRefreshInterval` unless `force`d.
        mutating func refreshLag(force: Bool) async {
            let now = ContinuousClock.now
            if !force, let last = self.lastLagRefresh, now - last < WebhookDelivery.lagRefreshInterval { return }
            if force, let last = self.lastLagRefresh, now - last < .milliseconds(100) { return }
            self.lastLagRefresh = now
            if let pending = try? await self.store.webhookPending(self.key) { self.lag.record(pending) }
        }
    }
}
