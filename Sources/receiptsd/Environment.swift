import Foundation
import Logging

/// Reads the process environment: the one place that does, and only the names of
/// `ConfigurationVariable` (glibc's own `GLIBC_TUNABLES` aside, read from `variables`).
struct Environment {
    let variables: [String: String]

    init(_ variables: [String: String] = ProcessInfo.processInfo.environment) {
        self.variables = variables
    }

    /// The variable's value; nil when it is unset or empty.
    subscript(variable: ConfigurationVariable) -> String? {
        guard let value = self.variables[variable.rawValue], !value.isEmpty else { return nil }
        return value
    }

    /// The variable's value, else its default.
    func string(_ variable: ConfigurationVariable) -> String? {
        self[variable] ?? variable.defaultValue
    }

    /// The repository this binary was built from, for development runs.
    static let sourceRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // receiptsd
        .deletingLastPathComponent()  // Sources
        .deletingLastPathComponent()

    /// `RECEIPTS_MIGRATIONS_DIR`, else `sql/migrations` of the current directory, else of
    /// the source tree.
    func migrationsDirectory() -> URL {
        if let configured = self[.migrationsDirectory] { return URL(fileURLWithPath: configured) }
        let local = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("sql/migrations")
        if FileManager.default.fileExists(atPath: local.path) { return local }
        return Self.sourceRoot.appendingPathComponent("sql/migrations")
    }

    /// `DATABASE_URL`, or the URL of the local PostgreSQL that `scripts/postgres.sh`
    /// starts (installing it when missing).
    func databaseURL(logger: Logger) throws -> String {
        if let url = self[.databaseURL] { return url }
        let candidates = [
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("scripts/postgres.sh"),
            Self.sourceRoot.appendingPathComponent("scripts/postgres.sh"),
        ]
        guard let script = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw ConfigurationError("DATABASE_URL is not set and scripts/postgres.sh was not found to start a local PostgreSQL")
        }
        logger.info("DATABASE_URL is not set; starting the local PostgreSQL", metadata: ["script": "\(script.path)"])
        let process = Process()
        process.executableURL = script
        process.arguments = ["url"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let url = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0, !url.isEmpty else {
            throw ConfigurationError("scripts/postgres.sh could not start a local PostgreSQL (exit \(process.terminationStatus))")
        }
        return url
    }

    /// A whole number, its default when unset; within the variable's `range` if it has one.
    func integer(_ variable: ConfigurationVariable) throws -> Int {
        let name = variable.rawValue
        guard let text = self[variable] ?? variable.defaultValue else {
            throw ConfigurationError("\(name) must be set")
        }
        guard let value = Int(text) else { throw ConfigurationError("\(name) must be a number, not \"\(text)\"") }
        if let range = variable.range, !range.contains(value) {
            throw ConfigurationError("\(name) must be between \(range.lowerBound) and \(range.upperBound), not \(value)")
        }
        return value
    }

    /// A whole number within the variable's `range`, nil when unset (for a variable whose
    /// default is worked out, `whenUnset`).
    func optionalInteger(_ variable: ConfigurationVariable) throws -> Int? {
        guard self[variable] != nil || variable.defaultValue != nil else { return nil }
        return try self.integer(variable)
    }

    /// True or false (1/0, yes/no, on/off too), its default when unset.
    func boolean(_ variable: ConfigurationVariable) throws -> Bool {
        let name = variable.rawValue
        guard let text = self[variable] ?? variable.defaultValue else {
            throw ConfigurationError("\(name) must be set")
        }
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigurationError("\(name) must be true or false, not \"\(text)\"")
        }
    }

    func logLevel() -> Logger.Level {
        self.string(.logLevel).flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .info
    }
}

/// A configuration problem, reported before anything starts.
struct ConfigurationError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
