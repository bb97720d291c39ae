import ArgumentParser

/// The `receiptsd` command line: `serve`, `migrate`, `tenant create` and `import`.
@main
struct Receiptsd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receiptsd",
        abstract: "Delivery and read receipts for chat apps, backed by PostgreSQL.",
        discussion: ConfigurationVariable.helpText,
        subcommands: [Serve.self, Migrate.self, Tenant.self, Import.self]
    )
}
