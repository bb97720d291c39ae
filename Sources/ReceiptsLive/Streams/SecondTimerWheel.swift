import NIOConcurrencyHelpers
import NIOCore

/// The timers of an event loop's streams (pings, heartbeats), kept by whole second: one task
/// scheduled on the loop a second fires every timer due in it, however many there are.
///
/// With a task scheduled for each socket, 10,000 streams kept 10,000 entries in the loop's
/// heap of scheduled tasks; taking the due ones out and re-heaping was about a fifth of an idle
/// stream's CPU (a profile of 10,000 SSE streams). Due times are rounded up to a whole second
/// of the loop's clock, so the timers armed within one second fire together.
///
/// Timers are not cancelled: each checks, when it fires, whether it is still wanted (a closed
/// stream's timer holds its handler until then, one interval at most). Used on its event loop
/// only; `on(_:)` finds a loop's wheel.
final class SecondTimerWheel {
    private static let nanosecondsASecond: UInt64 = 1_000_000_000

    /// The wheel of each event loop that has one (holding the loop, so that no other loop can
    /// take its identifier). The server's loops live as long as the process; a test's loop
    /// leaves an empty wheel behind.
    private static let wheels = NIOLockedValueBox<[ObjectIdentifier: NIOLoopBound<SecondTimerWheel>]>([:])

    /// The wheel of `loop`, made on first use. On that loop.
    static func on(_ loop: any EventLoop) -> SecondTimerWheel {
        let key = ObjectIdentifier(loop)
        return Self.wheels.withLockedValue { wheels in
            if let wheel = wheels[key] { return wheel.value }
            let wheel = SecondTimerWheel(loop: loop)
            wheels[key] = NIOLoopBound(wheel, eventLoop: loop)
            return wheel
        }
    }

    private let loop: any EventLoop
    /// The timers by the second (of the loop's uptime clock) they are due in.
    private var due: [UInt64: [() -> Void]] = [:]
    /// The loop's task for the earliest second with timers, and that second.
    private var next: (second: UInt64, task: Scheduled<Void>)?

    private init(loop: any EventLoop) {
        self.loop = loop
    }

    /// Runs `action` on the loop `interval` from now, rounded up to a whole second.
    func schedule(in interval: TimeAmount, _ action: @escaping () -> Void) {
        let dueAt = (self.loop.now + interval).uptimeNanoseconds
        let second = (dueAt + Self.nanosecondsASecond - 1) / Self.nanosecondsASecond
        self.due[second, default: []].append(action)
        if let next = self.next, next.second <= second { return }
        self.arm(for: second)
    }

    private func arm(for second: UInt64) {
        self.next?.task.cancel()
        let task = self.loop.assumeIsolated().scheduleTask(deadline: .uptimeNanoseconds(second * Self.nanosecondsASecond)) {
            self.fire(through: second)
        }
        self.next = (second, task)
    }

    /// Runs every timer due up to `second` (a late loop may have passed several), then arms
    /// for the next second with timers.
    private func fire(through second: UInt64) {
        self.next = nil
        for dueSecond in self.due.keys.filter({ $0 <= second }).sorted() {
            for action in self.due.removeValue(forKey: dueSecond) ?? [] { action() }
        }
        if let earliest = self.due.keys.min(), self.next?.second != earliest { self.arm(for: earliest) }
    }
}
