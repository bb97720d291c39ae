import Logging
import ServiceLifecycle

/// How a background worker paces itself so that other requests keep their latency: after
/// each bounded step (one transaction), a pause of `pauseFactor` times as long as the step
/// took, at least `pause`; when there is no work left, or a step failed, a wait for its
/// `WorkSignal` or `pollInterval` (work other instances gave, or a restart left), whichever
/// comes first.
struct PacedWork: Sendable {
    /// Shortest pause between two steps.
    var pause: Duration
    /// Pause after a step, as a multiple of the time it took.
    var pauseFactor: Int
    /// How often to look for work when idle.
    var pollInterval: Duration

    /// Runs `step` until cancelled or gracefully shut down. `step` does one bounded piece of
    /// work and returns false when there was none; an error is logged as `failure` and the
    /// worker goes on after the next wait.
    func run(
        signal: WorkSignal,
        logger: Logger,
        failure: Logger.Message,
        step: @escaping @Sendable () async throws -> Bool
    ) async {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    while !Task.isCancelled {
                        let started = ContinuousClock.now
                        guard try await step() else { break }
                        try? await Task.sleep(for: max(self.pause, (ContinuousClock.now - started) * self.pauseFactor))
                    }
                } catch {
                    logger.warning(failure, metadata: ["error": "\(error)"])
                }
                await signal.wait(atMost: self.pollInterval)
            }
        }
    }
}
