import Foundation

/// One SQL file of `sql/functions`, `sql/triggers` or `sql/views`: the one definition of the
/// functions, triggers or views it names, applied again whenever its text changes (Flyway's
/// repeatable migrations, Sqitch's reworkable changes).
///
/// A file must be safe to run again on a database that has its previous version:
/// `CREATE OR REPLACE FUNCTION` / `VIEW`, `DROP TRIGGER IF EXISTS` before `CREATE TRIGGER`,
/// and comments and grants restated. What is removed, and the old form of what
/// `CREATE OR REPLACE` cannot change (a function's arguments or result type, a view's
/// columns), is dropped once, by a new migration (as `0006_retired_functions.sql` does), which
/// runs before the scripts: no `DROP` is kept in a script for the databases that may still
/// have the old object.
public struct RepeatableScript: Sendable, Hashable {
    /// The folders, in the order they are applied: functions first (triggers and views use
    /// them), views before triggers. Within a folder, files apply in name order.
    public static let folders = ["functions", "views", "triggers"]

    /// The path below `sql/`, e.g. `functions/marking.sql`: the file's key in
    /// `receipts.schema_scripts`.
    public let path: String
    /// The file's SQL, run as one script inside a transaction.
    public let sql: String

    public init(path: String, sql: String) {
        self.path = path
        self.sql = sql
    }

    /// Reads every `.sql` file of the `functions`, `views` and `triggers` folders beside
    /// `migrationsDirectory` (that is, of its parent, `sql/`), in the order they apply. A
    /// missing folder holds nothing.
    public static func load(besides migrationsDirectory: URL) throws -> [RepeatableScript] {
        let root = migrationsDirectory.deletingLastPathComponent()
        var scripts: [RepeatableScript] = []
        for folder in Self.folders {
            let directory = root.appendingPathComponent(folder)
            guard FileManager.default.fileExists(atPath: directory.path) else { continue }
            let files: [String]
            do {
                files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            } catch {
                throw Migration.LoadingError(description: "cannot read \(directory.path): \(error.localizedDescription)")
            }
            for file in files.sorted() where file.hasSuffix(".sql") {
                let sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
                scripts.append(RepeatableScript(path: "\(folder)/\(file)", sql: sql))
            }
        }
        return scripts
    }
}
