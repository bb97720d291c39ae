import Foundation
import Logging

/// Everything the service can be configured with, read once at start (by `receiptsd`) and
/// passed down; nothing deeper reads the environment.
public struct ReceiptsConfiguration: Sendable {
    /// Names this process's database sessions (`application_name`, `<name>-listener` for the
    /// LISTEN connection) so that an operator can tell replicas apart in `pg_stat_activity`.
    public var instanceName: String = "receiptsd"
    /// Listen address (`RECEIPTS_HOST`, default 127.0.0.1).
    public var host: String
    /// Listen port (`RECEIPTS_PORT`, default 8080; 0 picks a free port).
    public var port: Int
    /// libpq connection string or URI (`DATABASE_URL`).
    public var databaseURL: String
    /// Bearer token for `/admin/v1/*` (`RECEIPTS_ADMIN_TOKEN`); nil disables the admin API.
    public var adminToken: String?
    /// Most database connections the service opens (`RECEIPTS_DATABASE_POOL_SIZE`, default 10).
    public var databasePoolSize: Int
    /// Apply pending migrations before serving (`serve --no-migrate` turns it off).
    public var runMigrations: Bool
    /// Where the `NNNN_name.sql` migrations are (`RECEIPTS_MIGRATIONS_DIR`).
    public var migrationsDirectory: URL
    /// How long events stay in the log for streams to resume from
    /// (`RECEIPTS_EVENT_RETENTION_SECONDS`, default 7 days).
    public var eventRetentionSeconds: Int
    /// How many events a stream may fall behind before it is closed
    /// (`RECEIPTS_STREAM_MAX_LAG`, default 5000).
    public var streamMaximumLag: Int
    /// Whether to wake other instances on the same database after this one's writes
    /// (`RECEIPTS_NOTIFY_OTHER_INSTANCES`, default true). Instances announce themselves, and
    /// an instance sends these notifications only while it hears another one; `false` also
    /// stops the announcements (one NOTIFY every 5 seconds).
    public var notifiesOtherInstances: Bool
    /// How often this instance announces itself to the others on the same database (default
    /// 5 seconds; not read from the environment). A peer counts as gone after three intervals
    /// unheard.
    public var peerAnnouncementInterval: Duration = .seconds(5)
    /// How long live events wait at a missing event id before the hub abandons it
    /// (`EventHub.Options.abandonGapsAfter`; not read from the environment).
    public var abandonEventGapsAfter: Duration = .seconds(5)
    /// How long SIGTERM/SIGINT waits for streams to close and requests in flight to finish
    /// before the process exits regardless (`RECEIPTS_SHUTDOWN_GRACE_SECONDS`, default 10).
    public var shutdownGracePeriod: Duration
    /// Most streams (WebSocket and SSE) one user may have open on this instance
    /// (`RECEIPTS_MAX_STREAMS_PER_USER`, default 20); one more is 429 before the upgrade.
    public var maximumStreamsPerUser: Int
    /// Most streams one tenant (its key and its users together) may have open on this
    /// instance (`RECEIPTS_MAX_STREAMS_PER_TENANT`, default 10000).
    public var maximumStreamsPerTenant: Int
    /// How often an open stream's credential is checked again, so that a stream opened with a
    /// replaced API key closes (default 10 seconds; not read from the environment). A user
    /// token's stream closes at the token's expiry regardless.
    public var streamCredentialCheckInterval: Duration = .seconds(10)
    /// Longest a request waits for the database in all, from its start: for a pooled
    /// connection and its statements together (`RECEIPTS_DATABASE_TIMEOUT_SECONDS`, default
    /// 5; `DatabaseDeadlineMiddleware`). Past it the request answers 503 `unavailable`.
    public var databaseTimeout: Duration
    /// Most HTTP connections (streams included) served at once (`RECEIPTS_MAX_CONNECTIONS`;
    /// `receiptsd` derives its default from the open-file limit, `ConnectionCap`). One more is
    /// answered at once, 503 `unavailable` (`/healthz` 200), and closed; the connections open
    /// keep being served. In-process default: 10,000.
    public var maximumConnections = 10_000
    /// Longest a connection may take to send a complete request head (default 10 seconds;
    /// not read from the environment).
    public var requestHeadTimeout: Duration = .seconds(10)
    /// Longest a keep-alive connection may stay idle between requests (default 60 seconds;
    /// not read from the environment).
    public var idleConnectionTimeout: Duration = .seconds(60)
    /// Web origins allowed for every tenant (`RECEIPTS_ALLOWED_ORIGINS`, default none); each
    /// tenant adds its own (`PUT /v1/settings`), and the service's own origin is allowed.
    public var allowedOrigins = AllowedOrigins.none
    /// The tenant of the demo page at `/demo` (`RECEIPTS_DEMO=true`, tenant
    /// `RECEIPTS_DEMO_TENANT`, default `demo`); nil, the default, serves no demo.
    public var demoTenant: String?
    /// Fairness between tenants: the pool's shares, the bounds of requests in flight and the
    /// default rate limit (`RECEIPTS_DATABASE_SHARED_CONNECTIONS`, `RECEIPTS_MAX_REQUESTS_IN_FLIGHT`,
    /// `RECEIPTS_TENANT_*`; see `PoolStateMachine` and `TenantAdmission`).
    public var fairness = Fairness()
    /// Reads served by hot standbys (`RECEIPTS_REPLICA_*`; see `StandbyReads`).
    public var replicas = Replicas()
    /// Webhook delivery: the address check, retries, attempt time and leases
    /// (`RECEIPTS_WEBHOOK_*`; see `WebhookDispatcher.Options`).
    public var webhooks = WebhookDispatcher.Options()

    public init(
        host: String = "127.0.0.1",
        port: Int = 8080,
        databaseURL: String,
        adminToken: String? = nil,
        databasePoolSize: Int = 10,
        runMigrations: Bool = true,
        migrationsDirectory: URL,
        eventRetentionSeconds: Int = 7 * 24 * 3600,
        streamMaximumLag: Int = 5000,
        notifiesOtherInstances: Bool = true,
        shutdownGracePeriod: Duration = .seconds(10),
        maximumStreamsPerUser: Int = 20,
        maximumStreamsPerTenant: Int = 10_000,
        databaseTimeout: Duration = .seconds(5)
    ) {
        self.shutdownGracePeriod = shutdownGracePeriod
        self.maximumStreamsPerUser = maximumStreamsPerUser
        self.maximumStreamsPerTenant = maximumStreamsPerTenant
        self.databaseTimeout = databaseTimeout
        self.notifiesOtherInstances = notifiesOtherInstances
        self.eventRetentionSeconds = eventRetentionSeconds
        self.streamMaximumLag = streamMaximumLag
        self.host = host
        self.port = port
        self.databaseURL = databaseURL
        self.adminToken = adminToken
        self.databasePoolSize = databasePoolSize
        self.runMigrations = runMigrations
        self.migrationsDirectory = migrationsDirectory
    }

    /// Bulk imports (docs/api.md, "Importing history").
    public var imports = Imports()

    /// Bulk imports (`POST /v1/imports`) and how they are loaded.
    public struct Imports: Sendable {
        /// The largest body (`RECEIPTS_IMPORT_MAX_BYTES`, default 1 GiB); a larger one is 413.
        public var maximumBytes = 1 << 30
        /// Most bodies this instance takes at once (each holds a database connection of its
        /// own while it arrives); one more is 503 (not read from the environment).
        public var concurrentUploads = 2
        /// Staged rows loaded in one transaction (not read from the environment).
        public var groupRows = 250_000
        /// After each group, a pause of this many times as long as it took, so that the
        /// other tenants' requests keep most of the database (not read from the environment).
        public var pauseFactor = 1
        /// How long an instance's claim on an import lasts unless renewed.
        public var lease: Duration = .seconds(120)
        /// How often an idle instance looks for imports that others left (not read from the
        /// environment; a new import wakes this instance at once).
        public var pollInterval: Duration = .seconds(5)

        public init() {}
    }

    /// The hot standbys that serve reads (docs/operations.md, "Read replicas").
    public struct Replicas: Sendable {
        /// The standbys, libpq's multi-host form (`RECEIPTS_REPLICA_DATABASE_URL`); nil: every
        /// read goes to the primary.
        public var databaseURL: String?
        /// The longest a read waits for a standby to replay what it must show
        /// (`RECEIPTS_REPLICA_WAIT_MS`, default 20 ms).
        public var wait: Duration = .milliseconds(20)
        /// A standby further behind serves nothing (`RECEIPTS_REPLICA_MAX_LAG_MS`, default 2 s).
        public var maximumLag: Duration = .seconds(2)
        /// How often the standbys are checked (default 100 ms; not read from the environment).
        public var checkInterval: Duration = .milliseconds(100)
        /// How long a user's own writes bind the reads about them that come without a token
        /// (default 30 s; not read from the environment).
        public var ownWritesWindow: Duration = .seconds(30)

        public init() {}
    }

    /// How the instance shares itself between tenants (docs/operations.md, "Fairness and rate
    /// limits").
    public struct Fairness: Sendable {
        /// Requests of all tenants in flight beyond which the instance is saturated, and a
        /// tenant over its share of them is refused 429 (default 256).
        public var saturation = 256
        /// The most requests of one tenant in flight; one more is refused 429 (default 128).
        public var tenantMaximum = 128
        /// Database connections that tenants share equally while two or more are active (each
        /// holds at most its share, at least one); a tenant alone may use all of the pool but
        /// one connection (default 4: about twice the bench machine's CPU cores).
        public var sharedConnections = 4
        /// The rate limit of tenants without one of their own; nil (the default): none.
        public var defaultRequestsPerSecond: Int?
        /// The burst of tenants without one of their own; nil: one second's worth.
        public var defaultBurst: Int?
        /// The most of each event loop's time, in percent, that writing events to live streams
        /// takes while more wait (`EventHub.Options.fanOutLoopShare`; default 80).
        public var fanOutLoopShare = 80

        public init() {}
    }
}
