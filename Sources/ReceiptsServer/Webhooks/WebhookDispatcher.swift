import Foundation
import Logging
import NIOConcurrencyHelpers
import ReceiptsLive
import ReceiptsStore
import ServiceLifecycle

/// Runs this instance's webhook deliveries: one `WebhookDelivery` per webhook whose lease it
/// holds.
///
/// Every `claimInterval` (and at once after a `PUT` or `DELETE` on this instance) it renews
/// its leases and takes free or expired ones (`ReceiptsStore.claimWebhooks`: a lease in
/// PostgreSQL, taken with `SKIP LOCKED`, so two instances never deliver one webhook at once
/// and no coordinator of our own is needed), starts a delivery for each webhook it newly
/// holds and stops those it no longer holds (deleted, or taken over after this instance
/// stalled). An instance that stops without a word (`kill -9`) stops renewing: its leases
/// expire after `lease`, and another instance takes them at its next claim, so within
/// `lease + claimInterval` (20 + 2 s by default, inside the contract's 30 s). On graceful
/// shutdown the deliveries end (an attempt under way is abandoned: the batch goes out again
/// from the position in the database) and the leases are given back, so another instance
/// takes over at its next claim.
public final class WebhookDispatcher: Service, Sendable {
    /// Tuning knobs (`ReceiptsConfiguration.webhooks`).
    public struct Options: Sendable {
        /// Loopback and private receivers allowed (`RECEIPTS_WEBHOOK_ALLOW_PRIVATE_NETWORKS`).
        public var allowsPrivateNetworks: Bool
        /// The first retry's delay, doubled for each further failure
        /// (`RECEIPTS_WEBHOOK_RETRY_BASE_MILLISECONDS`, default 1 s as docs/api.md says; a
        /// smaller one is for tests).
        public var retryBase: Duration
        /// The longest delay between attempts (5 min).
        public var retryMaximum: Duration
        /// How long a receiver has to answer an attempt (10 s).
        public var attemptTimeout: Duration
        /// How long a lease lasts unless renewed (`RECEIPTS_WEBHOOK_LEASE_SECONDS`, default 20).
        /// Longer than an attempt, so that a lease never lapses while an attempt waits for
        /// its answer: a batch is sent by one instance at a time.
        public var lease: Duration
        /// How often leases are renewed and free ones looked for: the lease / 10, at most 2 s,
        /// so that a `DELETE` made on another instance stops deliveries here within 5 s.
        public var claimInterval: Duration { min(.seconds(2), self.lease / 10) }
        /// The most webhooks one instance delivers at once.
        public var maximumPerInstance: Int

        public init(
            allowsPrivateNetworks: Bool = false, retryBase: Duration = .seconds(1), retryMaximum: Duration = .seconds(300),
            attemptTimeout: Duration = .seconds(10), lease: Duration = .seconds(20), maximumPerInstance: Int = 10_000
        ) {
            self.allowsPrivateNetworks = allowsPrivateNetworks
            self.retryBase = retryBase
            self.retryMaximum = retryMaximum
            self.attemptTimeout = attemptTimeout
            self.lease = lease
            self.maximumPerInstance = maximumPerInstance
        }
    }

    let store: ReceiptsStore
    let hub: EventHub
    let options: Options
    let logger: Logger
    let metrics: WebhookMetrics
    /// This process's name on the leases: the instance name and a random part, so that a
    /// restarted process (or a replica with the same name) never takes a lease for its own.
    let owner: String
    private let claims: AsyncStream<Void>
    private let requestClaim: AsyncStream<Void>.Continuation
    private let deliveries = NIOLockedValueBox([WebhookKey: WebhookDelivery]())

    public init(store: ReceiptsStore, hub: EventHub, options: Options, instanceName: String, logger: Logger, metrics: ServiceMetrics) {
        self.store = store
        self.hub = hub
        self.options = options
        self.logger = logger
        self.metrics = WebhookMetrics(factory: metrics.factory)
        self.owner = "\(instanceName)-\(String(UInt64.random(in: 1...UInt64.max), radix: 36))"
        (self.claims, self.requestClaim) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// What the address check allows (also for the `PUT`'s check of a literal address).
    var addressPolicy: WebhookAddressPolicy { WebhookAddressPolicy(allowsPrivateNetworks: self.options.allowsPrivateNetworks) }

    /// A webhook was created, replaced or deleted on this instance: look at the leases now.
    func webhooksChanged() {
        self.requestClaim.yield()
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask {
                    while !Task.isCancelled {
                        self.requestClaim.yield()
                        try? await Task.sleep(for: self.options.claimInterval)
                    }
                }
                for await _ in self.claims {
                    guard !Task.isCancelled else { break }
                    await self.claim(in: &group)
                }
                group.cancelAll()
            }
        }
        self.deliveries.withLockedValue { $0.removeAll() }
        self.metrics.recordDelivering(0)
        do {
            try await self.store.releaseWebhooks(owner: self.owner)
        } catch {
            self.logger.notice("webhooks: the leases could not be given back (they expire)", metadata: ["error": "\(error)"])
        }
    }

    /// Renews and takes leases, then starts and stops deliveries to match.
    private func claim(in group: inout DiscardingTaskGroup) async {
        let held: [WebhookKey: Int]
        do {
            held = try await self.store.claimWebhooks(owner: self.owner, lease: self.options.lease, maximum: self.options.maximumPerInstance)
        } catch {
            // The deliveries carry on: each renews its lease before an attempt, and stops when
            // it cannot acknowledge.
            self.logger.notice("webhooks: the leases could not be renewed", metadata: ["error": "\(error)"])
            return
        }
        let wanted = Set(held.keys)
        let (started, stopped) = self.deliveries.withLockedValue { deliveries -> ([WebhookDelivery], [WebhookDelivery]) in
            // Those no longer held, and those replayed since they started (they start again
            // from the new position).
            let stopped = deliveries.values.filter { delivery in held[delivery.key] != delivery.generation }
            for delivery in stopped { deliveries[delivery.key] = nil }
            var started: [WebhookDelivery] = []
            for (key, generation) in held where deliveries[key] == nil {
                let delivery = WebhookDelivery(
                    key: key, generation: generation, store: self.store, hub: self.hub, settings: self.deliverySettings, metrics: self.metrics,
                    logger: self.logger)
                deliveries[key] = delivery
                started.append(delivery)
            }
            return (started, stopped)
        }
        for delivery in stopped {
            self.logger.info("webhooks: delivery stops here", metadata: ["receipts.webhook": "\(delivery.key)"])
            delivery.stop()
        }
        for delivery in started {
            self.logger.info("webhooks: delivery starts here", metadata: ["receipts.webhook": "\(delivery.key)"])
            group.addTask {
                await delivery.run()
                // Ended by itself (lease or webhook gone): the next claim starts it again if
                // this instance still holds it.
                self.deliveries.withLockedValue { deliveries in
                    if deliveries[delivery.key] === delivery { deliveries[delivery.key] = nil }
                }
            }
        }
        self.metrics.recordDelivering(wanted.count)
    }

    private var deliverySettings: WebhookDelivery.Settings {
        WebhookDelivery.Settings(
            owner: self.owner, lease: self.options.lease,
            backoff: WebhookBackoff(base: self.options.retryBase, maximum: self.options.retryMaximum),
            attemptTimeout: self.options.attemptTimeout, addressPolicy: self.addressPolicy)
    }
}
