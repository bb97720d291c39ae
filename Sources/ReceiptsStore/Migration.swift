import Foundation

/// One SQL file of `sql/migrations`, named `NNNN_name.sql`.
public struct Migration: Sendable, Hashable {
    /// The number the file name starts with; migrations apply in this order.
    public let version: Int
    /// The rest of the file name, e.g. `initial_schema`.
    public let name: String
    /// The file's SQL, run as one script inside a transaction.
    public let sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// Problems with a migrations directory.
    public struct LoadingError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Reads every `NNNN_name.sql` of `directory`, in version order.
    ///
    /// - Throws: `LoadingError` when the directory is missing, a `.sql` file is not named
    ///   `NNNN_name.sql`, or two files share a version.
    public static func load(from directory: URL) throws -> [Migration] {
        let files: [String]
        do {
            files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw LoadingError(description: "cannot read the migrations directory \(directory.path): \(error.localizedDescription)")
        }
        var migrations: [Migration] = []
        for file in files where file.hasSuffix(".sql") {
            let stem = file.dropLast(4)
            guard let separator = stem.firstIndex(of: "_"),
                let version = Int(stem[..<separator]), version > 0,
                stem.index(after: separator) < stem.endIndex
            else {
                throw LoadingError(description: "migration file \(file) is not named NNNN_name.sql")
            }
            let sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            migrations.append(Migration(version: version, name: String(stem[stem.index(after: separator)...]), sql: sql))
        }
        migrations.sort { $0.version < $1.version }
        for (earlier, later) in zip(migrations, migrations.dropFirst()) where earlier.version == later.version {
            throw LoadingError(description: "migrations \(earlier.name) and \(later.name) share version \(earlier.version)")
        }
        return migrations
    }
}
