import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
@testable import ReceiptsLive
import Testing

/// The event loop's timers of whole seconds (`SecondTimerWheel`), on a loop whose clock the
/// test moves.
@Suite("Second timer wheel")
struct SecondTimerWheelTests {
    @Test("timers fire at the whole second after they are due, those of one second together, and may schedule the next")
    func firesBySecond() async throws {
        let loop = NIOAsyncTestingEventLoop()
        let fired = NIOLockedValueBox<[String]>([])
        try await loop.submit {
            let wheel = SecondTimerWheel.on(loop)
            wheel.schedule(in: .milliseconds(1_200)) { fired.withLockedValue { $0.append("a") } }
            wheel.schedule(in: .milliseconds(1_900)) { fired.withLockedValue { $0.append("b") } }
            wheel.schedule(in: .seconds(3)) {
                fired.withLockedValue { $0.append("c") }
                SecondTimerWheel.on(loop).schedule(in: .seconds(2)) { fired.withLockedValue { $0.append("d") } }
            }
        }.get()
        await loop.advanceTime(by: .milliseconds(1_999))
        #expect(fired.withLockedValue { $0 } == [])
        await loop.advanceTime(by: .milliseconds(1))
        #expect(fired.withLockedValue { $0 } == ["a", "b"])
        await loop.advanceTime(by: .seconds(1))
        #expect(fired.withLockedValue { $0 } == ["a", "b", "c"])
        await loop.advanceTime(by: .seconds(2))
        #expect(fired.withLockedValue { $0 } == ["a", "b", "c", "d"])
        await loop.advanceTime(by: .seconds(60))
        #expect(fired.withLockedValue { $0 }.count == 4)
    }
}
