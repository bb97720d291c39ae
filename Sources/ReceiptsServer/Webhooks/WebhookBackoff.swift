/// When a failed batch is tried again: after `base` for the first failure, doubling with each
/// failure up to `maximum` (docs/api.md: 1 s doubling to 5 min), each delay scaled by a random
/// factor in 0.8–1.2 so that webhooks that failed together (a receiver's outage) do not all
/// come back in the same instant. Consecutive delays still grow (2 × 0.8 > 1.2) until the cap,
/// which the jitter never exceeds.
struct WebhookBackoff: Sendable {
    var base: Duration
    var maximum: Duration

    /// The delay after the `failures`-th failed attempt at a batch (1 for the first).
    func delay(afterFailures failures: Int, jitter: Double = Double.random(in: 0.8...1.2)) -> Duration {
        let doublings = max(0, min(failures - 1, 40))
        var delay = self.base
        for _ in 0..<doublings where delay < self.maximum { delay = delay * 2 }
        return min(min(delay, self.maximum) * jitter, self.maximum)
    }
}
