/// An environment variable `receiptsd` reads: the one list of them.
///
/// `Environment` reads no other name, `receiptsd --help` prints them all from here, and the
/// defaults below are the values the code uses, not a description of them. The table in
/// docs/operations.md says the same for operators; `ConfigurationDocsTests` fails when the
/// table, the README or `--help` drift from this list.
enum ConfigurationVariable: String, CaseIterable {
    case databaseURL = "DATABASE_URL"
    case host = "RECEIPTS_HOST"
    case port = "RECEIPTS_PORT"
    case adminToken = "RECEIPTS_ADMIN_TOKEN"
    case databasePoolSize = "RECEIPTS_DATABASE_POOL_SIZE"
    case databaseTimeoutSeconds = "RECEIPTS_DATABASE_TIMEOUT_SECONDS"
    case replicaDatabaseURL = "RECEIPTS_REPLICA_DATABASE_URL"
    case replicaWaitMilliseconds = "RECEIPTS_REPLICA_WAIT_MS"
    case replicaMaximumLagMilliseconds = "RECEIPTS_REPLICA_MAX_LAG_MS"
    case eventRetentionSeconds = "RECEIPTS_EVENT_RETENTION_SECONDS"
    case streamMaximumLag = "RECEIPTS_STREAM_MAX_LAG"
    case maximumStreamsPerUser = "RECEIPTS_MAX_STREAMS_PER_USER"
    case maximumStreamsPerTenant = "RECEIPTS_MAX_STREAMS_PER_TENANT"
    case maximumConnections = "RECEIPTS_MAX_CONNECTIONS"
    case maximumRequestsInFlight = "RECEIPTS_MAX_REQUESTS_IN_FLIGHT"
    case tenantMaximumRequestsInFlight = "RECEIPTS_TENANT_MAX_REQUESTS_IN_FLIGHT"
    case databaseSharedConnections = "RECEIPTS_DATABASE_SHARED_CONNECTIONS"
    case tenantRequestsPerSecond = "RECEIPTS_TENANT_REQUESTS_PER_SECOND"
    case tenantBurst = "RECEIPTS_TENANT_BURST"
    case streamFanOutShare = "RECEIPTS_STREAM_FANOUT_SHARE"
    case notifyOtherInstances = "RECEIPTS_NOTIFY_OTHER_INSTANCES"
    case shutdownGraceSeconds = "RECEIPTS_SHUTDOWN_GRACE_SECONDS"
    case webhookAllowPrivateNetworks = "RECEIPTS_WEBHOOK_ALLOW_PRIVATE_NETWORKS"
    case webhookLeaseSeconds = "RECEIPTS_WEBHOOK_LEASE_SECONDS"
    case webhookRetryBaseMilliseconds = "RECEIPTS_WEBHOOK_RETRY_BASE_MILLISECONDS"
    case importMaximumBytes = "RECEIPTS_IMPORT_MAX_BYTES"
    case allowedOrigins = "RECEIPTS_ALLOWED_ORIGINS"
    case otelEndpoint = "RECEIPTS_OTEL_ENDPOINT"
    case demo = "RECEIPTS_DEMO"
    case demoTenant = "RECEIPTS_DEMO_TENANT"
    case migrationsDirectory = "RECEIPTS_MIGRATIONS_DIR"
    case logLevel = "LOG_LEVEL"

    /// The value that stands in when the variable is unset or empty, exactly as
    /// `Environment` parses it; nil when unset means something else (`whenUnset`).
    var defaultValue: String? {
        switch self {
        case .databaseURL, .replicaDatabaseURL, .adminToken, .allowedOrigins, .migrationsDirectory, .maximumConnections, .tenantRequestsPerSecond, .tenantBurst,
            .otelEndpoint:
            nil
        case .host: "127.0.0.1"
        case .port: "8080"
        case .databasePoolSize: "10"
        case .databaseTimeoutSeconds: "5"
        case .replicaWaitMilliseconds: "20"
        case .replicaMaximumLagMilliseconds: "2000"
        case .eventRetentionSeconds: "604800"
        case .streamMaximumLag: "5000"
        case .maximumStreamsPerUser: "20"
        case .maximumStreamsPerTenant: "10000"
        case .maximumRequestsInFlight: "256"
        case .databaseSharedConnections: "4"
        case .tenantMaximumRequestsInFlight: "128"
        case .streamFanOutShare: "80"
        case .notifyOtherInstances: "true"
        case .shutdownGraceSeconds: "10"
        case .webhookAllowPrivateNetworks: "false"
        case .webhookLeaseSeconds: "20"
        case .webhookRetryBaseMilliseconds: "1000"
        case .importMaximumBytes: "1073741824"
        case .demo: "false"
        case .demoTenant: "demo"
        case .logLevel: "info"
        }
    }

    /// The values a whole number must lie in; nil for any number (or not a number).
    var range: ClosedRange<Int>? {
        switch self {
        case .databaseTimeoutSeconds: 1...600
        case .replicaWaitMilliseconds: 0...10_000
        case .replicaMaximumLagMilliseconds: 100...3_600_000
        case .maximumStreamsPerUser: 1...100_000
        case .maximumStreamsPerTenant: 1...10_000_000
        case .maximumConnections: 1...10_000_000
        case .maximumRequestsInFlight, .tenantMaximumRequestsInFlight, .databaseSharedConnections: 1...1_000_000
        case .tenantRequestsPerSecond, .tenantBurst: 1...1_000_000
        case .streamFanOutShare: 1...100
        case .shutdownGraceSeconds: 1...3600
        case .webhookLeaseSeconds: 11...3600
        case .webhookRetryBaseMilliseconds: 1...300_000
        case .importMaximumBytes: 1...(1 << 40)
        default: nil
        }
    }

    /// What happens while the variable is unset, for those without a default value.
    var whenUnset: String? {
        switch self {
        case .databaseURL: "serve, migrate and tenant start the local PostgreSQL under .receipts/ with scripts/postgres.sh"
        case .adminToken: "the admin API is off, and every /admin/* request answers 404"
        case .replicaDatabaseURL: "every read goes to the primary"
        case .allowedOrigins: "no origin but the service's own and each tenant's list"
        case .migrationsDirectory: "sql/migrations of the current directory, else of the source tree"
        case .tenantRequestsPerSecond: "no rate limit for tenants without one of their own (the limits on requests in flight still hold)"
        case .tenantBurst: "one second's worth of the default rate"
        case .otelEndpoint: "no spans are made or exported (tracing costs nothing)"
        case .maximumConnections:
            "the open-file limit (raised to the hard limit at start) less a reserve for PostgreSQL, webhooks and files: a tenth of it, 64 to 1024, and the database pool"
        default: nil
        }
    }

    /// What the variable sets, in one line.
    var meaning: String {
        switch self {
        case .databaseURL: "libpq connection string or URI of the database"
        case .host: "listen address (serve --host overrides it)"
        case .port: "listen port, 0 for any free one (serve --port overrides it)"
        case .adminToken: "bearer token for /admin/v1/*"
        case .databasePoolSize: "most PostgreSQL connections the service opens (the event listener's is one more)"
        case .databaseTimeoutSeconds: "longest a request waits for PostgreSQL in all; past it, 503 unavailable"
        case .replicaDatabaseURL: "hot standbys that serve unread counts, chats and message pages (libpq multi-host form; a pool of RECEIPTS_DATABASE_POOL_SIZE connections each)"
        case .replicaWaitMilliseconds: "longest a read waits for a standby to replay the write it must show before it goes to the primary"
        case .replicaMaximumLagMilliseconds: "a standby further behind the primary than this serves no reads until it catches up"
        case .eventRetentionSeconds: "how long events stay in the log for streams to resume from"
        case .streamMaximumLag: "events a stream may fall behind before it is closed (it can resume)"
        case .maximumStreamsPerUser: "most streams one user may have open on one instance; one more is 429"
        case .maximumStreamsPerTenant: "most streams one tenant (key and users together) may have open on one instance"
        case .maximumConnections: "most HTTP connections (streams included) served at once; one more is answered 503 (/healthz 200) and closed"
        case .maximumRequestsInFlight: "requests of all tenants in flight beyond which the instance is saturated: a tenant over its share of them is answered 429"
        case .tenantMaximumRequestsInFlight: "most requests of one tenant in flight on one instance; one more is 429"
        case .databaseSharedConnections: "database connections that tenants share equally while two or more are active (a tenant alone may use all of the pool but one connection); about twice the database server's CPU cores"
        case .tenantRequestsPerSecond: "default rate limit of a tenant, in requests a second on one instance (a tenant's own limit replaces it)"
        case .tenantBurst: "default burst of a tenant: most requests at once after a quiet spell, on one instance"
        case .streamFanOutShare: "most of each event loop's time, in percent, that writing events to live streams takes while more wait (the rest is left to requests); 100: no pause"
        case .notifyOtherInstances: "wake the other instances on the same database after this one's writes"
        case .shutdownGraceSeconds: "on SIGTERM/SIGINT, how long streams and requests get before the process exits"
        case .webhookAllowPrivateNetworks: "let webhooks reach loopback, private and link-local addresses"
        case .webhookLeaseSeconds: "how long an instance's claim on a webhook lasts unless renewed"
        case .webhookRetryBaseMilliseconds: "first retry delay of a failed webhook batch, doubled per failure (for tests)"
        case .importMaximumBytes: "largest body of POST /v1/imports, in bytes; a larger one is 413"
        case .allowedOrigins: "web origins allowed for every tenant, comma-separated (* for any)"
        case .otelEndpoint: "OTLP/HTTP endpoint to export traces to (http://collector:4318); W3C traceparent is then continued from requests to webhooks (OTEL_* variables tune the exporter)"
        case .demo: "serve the live demo page at /demo (development only: it hands out the demo users' tokens)"
        case .demoTenant: "the demo page's tenant"
        case .migrationsDirectory: "where the NNNN_name.sql migrations are (functions/, views/, triggers/ beside it)"
        case .logLevel: "trace, debug, info, notice, warning, error or critical"
        }
    }

    /// The configuration part of `receiptsd --help`: one line per variable, name first.
    static var helpText: String {
        let lines = Self.allCases.map { variable in
            var line = "\(variable.rawValue): \(variable.meaning)."
            if let value = variable.defaultValue {
                line += " Default \(value)."
            } else if let unset = variable.whenUnset {
                line += " Unset: \(unset)."
            }
            if let range = variable.range { line += " From \(range.lowerBound) to \(range.upperBound)." }
            return line
        }
        return """
            Configuration comes from the environment, read once at start; an empty value \
            counts as unset. docs/operations.md explains each variable.

            \(lines.joined(separator: "\n"))

            GLIBC_TUNABLES with a glibc.malloc.* tunable replaces the allocator settings serve \
            makes (docs/operations.md, "Memory").
            """
    }
}
