import Foundation

/// The (method, path) pairs of the OpenAPI document and of the generated client, read from
/// their text: enough for a document whose layout the repository controls, without a YAML
/// parser of the test's own.
enum ContractPaths {
    struct Operation: Hashable, Comparable, CustomStringConvertible {
        /// Upper case (`GET`).
        var method: String
        /// With its parameters blanked (`/v1/chats/{}/read`), as the generated client writes it.
        var path: String

        var description: String { "\(method) \(path)" }
        static func < (lhs: Self, rhs: Self) -> Bool { (lhs.path, lhs.method) < (rhs.path, rhs.method) }
    }

    static let methods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]

    /// Every operation under `paths:`: a path is a two-space-indented key starting with `/`,
    /// a method a four-space-indented key naming an HTTP method.
    static func operations(in document: String) throws -> Set<Operation> {
        var operations: Set<Operation> = []
        var inPaths = false
        var path: String?
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" ") && !line.isEmpty {
                inPaths = line == "paths:"
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), !line.hasPrefix("   "), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":"), let path {
                let key = String(line.dropFirst(4).dropLast())
                if methods.contains(key) {
                    operations.insert(Operation(method: key.uppercased(), path: blankingParameters(path)))
                }
            }
        }
        return operations
    }

    /// Every request the generated `Client` builds: its `template:` path and `method:`.
    static func operations(inGeneratedClient source: String) -> Set<Operation> {
        var operations: Set<Operation> = []
        var path: String?
        for line in source.split(separator: "\n") {
            let text = String(line).trimmingCharacters(in: .whitespaces)
            if text.hasPrefix("template: \""), let end = text.dropFirst(11).firstIndex(of: "\"") {
                path = String(text.dropFirst(11)[..<end])
            } else if text.hasPrefix("method: ."), let path {
                let method = text.dropFirst(9).prefix { $0.isLetter }
                operations.insert(Operation(method: method.uppercased(), path: path))
            }
        }
        return operations
    }

    /// `/v1/chats/{chatId}/read` as `/v1/chats/{}/read`.
    static func blankingParameters(_ path: String) -> String {
        var result = ""
        var inParameter = false
        for character in path {
            if character == "{" {
                inParameter = true
                result.append("{}")
            } else if character == "}" {
                inParameter = false
            } else if !inParameter {
                result.append(character)
            }
        }
        return result
    }
}

