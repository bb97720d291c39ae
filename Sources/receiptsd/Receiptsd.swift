import ArgumentParser

/// The `receiptsd` command line: `serve` and `migrate`.
@main
struct Receiptsd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receiptsd",
        abstract: "Delivery and read receipts for chat apps, backed by PostgreSQL.",
        discussion: """
            Configuration comes from the environment: DATABASE_URL (without it, a local \
            PostgreSQL under .receipts/ is started with scripts/postgres.sh), RECEIPTS_HOST, \
            RECEIPTS_PORT, RECEIPTS_ADMIN_TOKEN, RECEIPTS_DATABASE_POOL_SIZE, \
            RECEIPTS_MIGRATIONS_DIR, RECEIPTS_EVENT_RETENTION_SECONDS, RECEIPTS_STREAM_MAX_LAG, RECEIPTS_NOTIFY_OTHER_INSTANCES, \
            RECEIPTS_WEBHOOK_ALLOW_PRIVATE_NETWORKS, RECEIPTS_WEBHOOK_RETRY_BASE_MILLISECONDS, RECEIPTS_WEBHOOK_LEASE_SECONDS, LOG_LEVEL.
            """,
        subcommands: [Serve.self, Migrate.self, Tenant.self]
    )
}
