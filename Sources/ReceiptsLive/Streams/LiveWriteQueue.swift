import NIOConcurrencyHelpers
import NIOCore
import Synchronization

/// The live writes the hub handed one event loop (`LiveDeliveries.send`), written tenant by
/// tenant in turns (`TenantRoundRobin`): one tenant's crowd of streams does not hold another
/// tenant's events back. A read in a group that 10,000 streams of one tenant watch is 10,000
/// writes; a stream of another tenant whose event comes just after waits for one `quantum` of
/// them, not for all.
///
/// The loop writes `writesPerGo` at a time, flushes the sockets it wrote to, and does its other
/// work (requests, other streams' pulls) before the next go; while writes wait, the goes take
/// at most the loop's share that the hub sets (`EventHub.Options.fanOutLoopShare`, 80 % by
/// default: after a go, the loop pauses a quarter of the go's time), and a tenant with nothing
/// waiting has its few writes written at once. On the 2-core bench machine, where the bench
/// reads the streams beside the service, the pause halved another tenant's p99 beside a crowd
/// of 4,000 streams (40–53 ms to 15–21 ms) and made the crowd's own fan-out faster too
/// (10,000 streams: the last of one event 185 ms, not 389 ms); BENCHMARKS.md, run Q2.
///
/// A subscriber's writes keep their order (they are one tenant's), and every write handed to
/// the loop before a stream leaves live delivery is written before anything the stream sends
/// itself: a stream with writes waiting (`LiveSink.hasWaitingWrites`) has them all written
/// first, with the rest of its tenant's (`writeAll(of:)`, from `LiveSink.close()` and
/// `LiveSink.writeWaiting()`), as when the loop wrote each hand-over at once.
///
/// Used on its event loop only.
final class LiveWriteQueue {
    /// Writes of one tenant in its turn, before the next tenant's.
    static let quantum = 32
    /// Writes in one go of the event loop, then a flush.
    static let writesPerGo = 256

    /// Writes waiting in every loop's queue: the hub hands over at most
    /// `LiveDeliveries.defaultLimit` less these (`LiveDeliveries.init(limit:)`), so that a
    /// loop that cannot keep up makes streams pull instead of holding more memory.
    static let waitingEverywhere = Atomic<Int>(0)

    /// One write: a delivery, and the frames of its hand-over (`Delivery.frame` indexes them).
    struct Write {
        let delivery: LiveDeliveries.Delivery
        let frames: LiveFrames
        let fellBehind: @Sendable (EventFanOut.Key, _ period: Int, _ position: Int64) -> Void
    }

    /// The queue of each event loop that has one (holding the loop, so that no other loop can
    /// take its identifier), as `SecondTimerWheel.on(_:)` keeps its wheels.
    private static let queues = NIOLockedValueBox<[ObjectIdentifier: NIOLoopBound<LiveWriteQueue>]>([:])

    /// The queue of `loop`, made on first use. On that loop.
    static func on(_ loop: any EventLoop) -> LiveWriteQueue {
        let key = ObjectIdentifier(loop)
        return Self.queues.withLockedValue { queues in
            if let queue = queues[key] { return queue.value }
            let queue = LiveWriteQueue(loop: loop)
            queues[key] = NIOLoopBound(queue, eventLoop: loop)
            return queue
        }
    }

    private let loop: any EventLoop
    private var waiting = TenantRoundRobin<Write>()
    private var isGoScheduled = false
    /// See `enqueue(_:loopShare:)`: after a go that left writes waiting, the loop pauses for
    /// as long as the go took times (100 − share) / share.
    private var loopShare = 100

    private init(loop: any EventLoop) {
        self.loop = loop
    }

    /// Queues one hand-over's writes (in order for each subscriber) and writes a go at once
    /// unless one is already scheduled. `loopShare`: the most of the loop's time, in percent
    /// (1...100), that the goes take while writes wait (`EventHub.Options.fanOutLoopShare`).
    func enqueue(_ writes: [Write], loopShare: Int) {
        self.loopShare = min(100, max(1, loopShare))
        var byTenant: [String: [Write]] = [:]
        var tenants: [String] = []
        for write in writes {
            let tenant = write.delivery.subscriber.tenant
            if byTenant[tenant] == nil { tenants.append(tenant) }
            byTenant[tenant, default: []].append(write)
        }
        for tenant in tenants {
            let writes = byTenant[tenant]!
            // A tenant with nothing waiting is owed its turn: a few writes go at once, without
            // waiting for the next go (a pause, when the loop paces a crowd's writes).
            if writes.count <= Self.quantum, !self.waiting.hasItems(of: tenant) {
                self.write(writes)
            } else {
                self.waiting.append(writes, of: tenant)
            }
        }
        if !self.isGoScheduled { self.go() }
    }

    /// Writes everything of `tenant` waiting, now: what a stream of the tenant that leaves live
    /// delivery was handed is written before what it sends itself.
    func writeAll(of tenant: String) {
        self.write(self.waiting.takeAll(of: tenant))
    }

    private func go() {
        self.isGoScheduled = false
        let start = NIODeadline.now()
        self.write(self.waiting.take(Self.writesPerGo, quantum: Self.quantum))
        guard !self.waiting.isEmpty else { return }
        self.isGoScheduled = true
        let queue = NIOLoopBound(self, eventLoop: self.loop)
        let pause = (NIODeadline.now() - start).nanoseconds * Int64(100 - self.loopShare) / Int64(self.loopShare)
        if pause > 0 {
            self.loop.scheduleTask(in: .nanoseconds(pause)) { queue.value.go() }
        } else {
            self.loop.execute { queue.value.go() }
        }
    }

    private func write(_ writes: [Write]) {
        guard !writes.isEmpty else { return }
        var toFlush: [LiveSink] = []
        for write in writes {
            let (delivery, sink) = (write.delivery, write.delivery.route.sink)
            switch sink.write(write.frames.frames[delivery.frame], period: delivery.route.period) {
            case .written(isFirstSinceFlush: true): toFlush.append(sink)
            case .written, .dropped: break
            case .full: write.fellBehind(delivery.subscriber, delivery.route.period, delivery.previous)
            }
        }
        for sink in toFlush { sink.flush() }
        Self.waitingEverywhere.subtract(writes.count, ordering: .relaxed)
    }
}

/// The frames of one hand-over to one event loop, shared by its writes.
final class LiveFrames: Sendable {
    let frames: [LiveFrame]

    init(_ frames: [LiveFrame]) {
        self.frames = frames
    }
}
