/// How `ReceiptsClient.events(resumingAfter:)` keeps its stream: reconnecting after the
/// connection ends or fails, with a growing pause that stays bounded, and giving up (the
/// sequence throws) after too many failures in a row.
public struct EventStreamConfiguration: Sendable {
    /// The pause before the first reconnection; each failure in a row doubles it, up to
    /// `maximumReconnectDelay`.
    public var initialReconnectDelay: Duration
    public var maximumReconnectDelay: Duration
    /// Connections that fail or end without an event, in a row, before the sequence throws
    /// the last error. An event, or a connection that stayed up a minute, starts the count
    /// again.
    public var maximumConsecutiveFailures: Int
    /// The largest event accepted (its `id:` and `data:` lines); a longer one is a broken
    /// stream, not something to buffer without end. The service's events are far smaller.
    public var maximumEventBytes: Int

    public init(
        initialReconnectDelay: Duration = .milliseconds(100),
        maximumReconnectDelay: Duration = .seconds(10),
        maximumConsecutiveFailures: Int = 30,
        maximumEventBytes: Int = 1 << 20
    ) {
        self.initialReconnectDelay = initialReconnectDelay
        self.maximumReconnectDelay = maximumReconnectDelay
        self.maximumConsecutiveFailures = max(1, maximumConsecutiveFailures)
        self.maximumEventBytes = maximumEventBytes
    }
}
