/// How to reach a PostgreSQL server.
public struct PostgresConfiguration: Sendable {
    /// A libpq connection string: `postgresql://user:password@host:port/db?param=value` or
    /// `host=… port=… dbname=…`. Passed to libpq as is; its settings win over the defaults below.
    public var connectionString: String
    /// `application_name`, shown in `pg_stat_activity`.
    public var applicationName: String
    /// Seconds libpq waits for a connection before giving up (`connect_timeout`).
    public var connectTimeoutSeconds: Int
    /// Seconds a server that stops answering altogether (a network partition, a host that is
    /// gone) may go unnoticed on an open connection, where neither `statement_timeout` (the
    /// server's) nor a cancel request (sent over the network) can end a call: TCP keepalives
    /// probe a quiet connection after half of it, and data or probes left unacknowledged
    /// for all of it (`tcp_user_timeout`) end the connection, so the blocked call fails.
    public var unresponsiveServerTimeoutSeconds: Int = 10
    /// A role every transaction takes first (`SET LOCAL ROLE`), e.g. one that row-level
    /// security applies to; nil keeps the login role. Never a session-level `SET ROLE`:
    /// nothing a transaction does to its role (`RESET ROLE`, say) outlives it, and the next
    /// transaction on the session takes the role again. A statement outside a transaction
    /// gets a transaction of its own that takes the role, in the same round trip.
    public var role: String?
    /// Run-time parameters every session sets right after connecting (`set_config(name,
    /// value, false)`), in this order, e.g. `("receipts.notify", "off")`.
    public var settings: [(name: String, value: String)]

    public init(
        connectionString: String,
        applicationName: String = "receipts",
        connectTimeoutSeconds: Int = 10,
        role: String? = nil,
        settings: [(name: String, value: String)] = []
    ) {
        self.connectionString = connectionString
        self.applicationName = applicationName
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.role = role
        self.settings = settings
    }

    /// Keyword/value pairs for `PQconnectdbParams`. Our defaults come first so that the
    /// connection string (expanded from `dbname`) overrides them.
    var connectionParameters: [(String, String)] {
        [
            ("connect_timeout", String(self.connectTimeoutSeconds)),
            ("application_name", self.applicationName),
            ("keepalives", "1"),
            ("keepalives_idle", String(max(1, self.unresponsiveServerTimeoutSeconds / 2))),
            ("keepalives_interval", String(max(1, self.unresponsiveServerTimeoutSeconds / 6))),
            ("keepalives_count", "3"),
            ("tcp_user_timeout", String(self.unresponsiveServerTimeoutSeconds * 1000)),
            ("dbname", self.connectionString),
        ]
    }
}
