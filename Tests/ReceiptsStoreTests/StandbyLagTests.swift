import Postgres
import Testing

@testable import ReceiptsStore

/// A standby's lag, measured on the primary's side (`PrimaryPositionHistory`).
struct StandbyLagTests {
    let start = ContinuousClock.now

    func position(_ offset: UInt64) -> WALPosition { WALPosition(offset: offset) }

    @Test("a standby at or past the primary's newest position has no lag, even when the primary was idle for long")
    func caughtUp() {
        var history = PrimaryPositionHistory(span: .seconds(10))
        history.record(self.position(100), at: self.start)
        history.record(self.position(100), at: self.start + .seconds(5))
        #expect(history.lag(of: self.position(100), now: self.start + .seconds(9)) == .zero)
        #expect(history.lag(of: self.position(120), now: self.start + .seconds(9)) == .zero)
    }

    @Test("behind: the time since the primary first stood past the standby's position")
    func behind() {
        var history = PrimaryPositionHistory(span: .seconds(10))
        history.record(self.position(100), at: self.start)
        history.record(self.position(200), at: self.start + .milliseconds(100))
        history.record(self.position(300), at: self.start + .milliseconds(200))
        let now = self.start + .milliseconds(250)
        #expect(history.lag(of: self.position(250), now: now) == .milliseconds(50))
        #expect(history.lag(of: self.position(150), now: now) == .milliseconds(150))
        #expect(history.lag(of: self.position(50), now: now) == .milliseconds(250))
    }

    @Test("samples older than the span go, and a standby behind all that remain is at least that far behind")
    func bounded() throws {
        var history = PrimaryPositionHistory(span: .seconds(1))
        for step in 0..<100 {
            history.record(self.position(UInt64(step + 1) * 10), at: self.start + .milliseconds(100 * step))
        }
        #expect(history.samples.count <= 11)
        let now = self.start + .milliseconds(9_900)
        #expect(try #require(history.lag(of: self.position(0), now: now)) >= .seconds(1))
    }

    @Test("nothing known of the primary yet: the lag is unknown")
    func unknown() {
        #expect(PrimaryPositionHistory(span: .seconds(1)).lag(of: self.position(1), now: self.start) == nil)
    }
}
