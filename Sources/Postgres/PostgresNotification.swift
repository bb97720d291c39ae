/// A `NOTIFY` received on a channel the listener listens on.
public struct PostgresNotification: Sendable, Hashable {
    /// The channel it was sent on.
    public let channel: String
    /// The payload (empty when none was given).
    public let payload: String
    /// The server process that sent it.
    public let backendPID: Int32
}
