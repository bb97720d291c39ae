import NIOCore

extension EventLoop {
    /// The deadline `interval` from now on this loop's clock, rounded up to a whole second: the
    /// timers of the sockets that were armed within the same second fire in one wake-up of the
    /// loop instead of each in its own (with 10,000 sockets, waking for each was most of a
    /// ping's cost).
    func wholeSecondDeadline(in interval: TimeAmount) -> NIODeadline {
        let second: UInt64 = 1_000_000_000
        let due = (self.now + interval).uptimeNanoseconds
        return .uptimeNanoseconds((due + second - 1) / second * second)
    }
}
