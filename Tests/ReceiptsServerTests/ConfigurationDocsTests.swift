import Foundation
import TestSupport
import Testing

/// The configuration is written once, in code (`ConfigurationVariable` in Sources/receiptsd,
/// through which `Environment` reads), and shown in three places: `receiptsd --help`, the
/// table of docs/operations.md and the README's table. These tests hold them together, so
/// that a variable added to the code without its line in the docs, or a default changed in
/// one place only, fails here.
@Suite("Configuration docs")
struct ConfigurationDocsTests {
    /// What a document's table says of a variable: its default value (the value in
    /// backquotes the default cell starts with), or nil when the cell starts with words
    /// ("none: the admin API is off").
    struct Row: Equatable, CustomStringConvertible {
        var name: String
        var defaultValue: String?
        var description: String { "\(self.name) = \(self.defaultValue ?? "none")" }
    }

    static func file(_ path: String) throws -> String {
        try String(contentsOf: TestDatabase.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// The names `receiptsd` reads: its string literals that are a variable's name.
    static func namesReadByReceiptsd() throws -> Set<String> {
        let folder = TestDatabase.packageRoot.appendingPathComponent("Sources/receiptsd")
        var names: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) where file.hasSuffix(".swift") {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for match in text.matches(of: #/"(DATABASE_URL|LOG_LEVEL|RECEIPTS_[A-Z0-9_]+)"/#) {
                names.insert(String(match.output.1))
            }
        }
        return names
    }

    /// The rows of the variable tables in `markdown` (under `section` only, when given): rows
    /// whose first cell is one name in backquotes; columns `variable | default | meaning`.
    static func rows(of markdown: String, section: String? = nil) -> [Row] {
        var lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if let section {
            guard let start = lines.firstIndex(of: section) else { return [] }
            lines = Array(lines[(start + 1)...])
            if let end = lines.firstIndex(where: { $0.hasPrefix("## ") }) { lines = Array(lines[..<end]) }
        }
        return lines.compactMap { line -> Row? in
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard line.hasPrefix("| `"), cells.count >= 3,
                let name = cells[0].wholeMatch(of: #/`(DATABASE_URL|LOG_LEVEL|RECEIPTS_[A-Z0-9_]+)`/#)?.output.1
            else { return nil }
            let defaultCell = cells[1]
            let value = defaultCell.prefixMatch(of: #/`([^`]*)`/#).map { String($0.output.1) }
            return Row(name: String(name), defaultValue: value)
        }
    }

    /// `receiptsd --help`, as one line: ArgumentParser wraps it to the terminal's width.
    static func help() async throws -> String {
        let result = try await TestDatabase.run(TestDatabase.receiptsdExecutable, arguments: ["--help"])
        return result.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// What `--help` says of each variable: from `NAME: ` to the next variable's line.
    static func helpEntries(_ help: String, names: Set<String>) -> [String: String] {
        let starts = names.compactMap { name in help.range(of: "\(name): ").map { (name, $0.lowerBound) } }
            .sorted { $0.1 < $1.1 }
        var entries: [String: String] = [:]
        for (index, (name, start)) in starts.enumerated() {
            let end = index + 1 < starts.count ? starts[index + 1].1 : help.endIndex
            entries[name] = String(help[start..<end])
        }
        return entries
    }

    @Test("every variable receiptsd reads is in --help and in docs/operations.md's table, and no other")
    func everyVariableIsDocumented() async throws {
        let read = try Self.namesReadByReceiptsd()
        #expect(read.contains("DATABASE_URL") && read.contains("RECEIPTS_ADMIN_TOKEN"), "\(read.sorted())")

        let operations = Self.rows(of: try Self.file("docs/operations.md"), section: "## Configuration")
        let documented = Set(operations.map(\.name))
        #expect(documented.count == operations.count, "a variable has two rows: \(operations)")
        #expect(read.subtracting(documented).isEmpty, "read but not in docs/operations.md: \(read.subtracting(documented).sorted())")
        #expect(documented.subtracting(read).isEmpty, "in docs/operations.md but never read: \(documented.subtracting(read).sorted())")

        let entries = Self.helpEntries(try await Self.help(), names: read)
        let missing = read.subtracting(entries.keys)
        #expect(missing.isEmpty, "not in receiptsd --help: \(missing.sorted())")
    }

    @Test("--help, docs/operations.md and the README give each variable the same default")
    func defaultsAgree() async throws {
        let operations = Self.rows(of: try Self.file("docs/operations.md"), section: "## Configuration")
        let entries = Self.helpEntries(try await Self.help(), names: Set(operations.map(\.name)))
        for row in operations {
            let entry = try #require(entries[row.name], "\(row.name) is not in receiptsd --help")
            if let value = row.defaultValue {
                #expect(entry.contains("Default \(value)."), "docs/operations.md: \(row); --help: \(entry)")
            } else {
                #expect(entry.contains("Unset: ") && !entry.contains("Default "), "docs/operations.md: \(row); --help: \(entry)")
            }
        }

        let readme = Self.rows(of: try Self.file("README.md"))
        #expect(!readme.isEmpty, "README.md shows no configuration table")
        let byName = Dictionary(uniqueKeysWithValues: operations.map { ($0.name, $0) })
        for row in readme {
            #expect(byName[row.name] == row, "README.md: \(row); docs/operations.md: \(byName[row.name]?.description ?? "no row")")
        }
    }

    @Test("docker-compose.yml and the Dockerfile set only variables receiptsd reads")
    func deploymentFilesUseRealNames() throws {
        let read = try Self.namesReadByReceiptsd()
        for path in ["docker-compose.yml", "Dockerfile"] {
            let used = Set(try Self.file(path).matches(of: #/\b(DATABASE_URL|LOG_LEVEL|RECEIPTS_[A-Z0-9_]+)\b/#).map { String($0.output.1) })
            #expect(!used.isEmpty, "\(path) sets no variable")
            #expect(used.subtracting(read).isEmpty, "\(path) names what receiptsd never reads: \(used.subtracting(read).sorted())")
        }
    }

    @Test("nothing below receiptsd reads the environment: the configuration is passed in")
    func onlyReceiptsdReadsTheEnvironment() throws {
        let root = TestDatabase.packageRoot.appendingPathComponent("Sources")
        for module in ["CLibPQ", "Postgres", "ReceiptsCore", "ReceiptsStore", "ReceiptsServer"] {
            let folder = root.appendingPathComponent(module)
            guard let files = FileManager.default.enumerator(atPath: folder.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") || file.hasSuffix(".h") {
                let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                #expect(!text.contains("processInfo.environment") && !text.contains("getenv("), "Sources/\(module)/\(file)")
            }
        }
    }
}
