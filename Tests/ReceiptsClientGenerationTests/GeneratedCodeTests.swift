import Foundation
import Testing
import _OpenAPIGeneratorCore

/// `Sources/ReceiptsClient/Generated` is swift-openapi-generator's output for `openapi.yaml`,
/// generated once and committed rather than by the build plugin at every build: with the
/// plugin, every package that depends on `ReceiptsClient` (and `Examples/`) would build the
/// generator, OpenAPIKit and Yams before its own code; this way only this test target
/// does (docs/client.md gives the build times measured).
///
/// This test runs the generator the package resolves (1.14.3 when written), in process, on
/// the document and asserts that the committed files are exactly its output (with plain
/// `import`s, see `withPlainImports`). With `RECEIPTS_REGENERATE_CLIENT=1` it writes them
/// first: `RECEIPTS_REGENERATE_CLIENT=1 swift test --filter GeneratedCodeTests`.
@Suite("The generated client")
struct GeneratedCodeTests {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // ReceiptsClientGenerationTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()
    static let document = packageRoot.appendingPathComponent("Sources/ReceiptsServer/Resources/openapi.yaml")
    static let generatedDirectory = packageRoot.appendingPathComponent("Sources/ReceiptsClient/Generated")

    /// The generator's configuration: types and client, public (the library's face uses
    /// them and exposes them), idiomatic names.
    static func configuration(_ mode: GeneratorMode) -> Config {
        Config(
            mode: mode,
            access: .public,
            additionalFileComments: ["Generated from openapi.yaml by swift-openapi-generator; regenerate, never edit (see GeneratedCodeTests)."],
            namingStrategy: .idiomatic
        )
    }

    /// Every file the generator writes for the document, by name.
    static func generate() throws -> [String: String] {
        let input = InMemoryInputFile(absolutePath: document, contents: try Data(contentsOf: document))
        let diagnostics = RecordingDiagnostics()
        var files: [String: String] = [:]
        for mode in [GeneratorMode.types, .client] {
            for file in try runGenerator(input: input, config: configuration(mode), diagnostics: diagnostics) {
                files[file.baseName] = withPlainImports(String(decoding: file.contents, as: UTF8.self))
            }
        }
        return files
    }

    /// The generator's output with `public import X` written `import X`: the same for this
    /// module (without `InternalImportsByDefault` an import is public), and Swift 6.2 then
    /// does not warn about the imports a file leaves unused (the generator silences those
    /// warnings only for compilers from 6.4 on, with `@diagnose`).
    static func withPlainImports(_ source: String) -> String {
        source.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            if line.hasPrefix("public import ") { return line.dropFirst("public ".count) }
            if line.hasPrefix("@_spi(Generated) public import ") { return "@_spi(Generated) " + line.dropFirst("@_spi(Generated) public ".count) }
            return line
        }.joined(separator: "\n")
    }

    @Test("regenerating from openapi.yaml gives the committed files, byte for byte")
    func regenerationGivesTheCommittedFiles() throws {
        let generated = try Self.generate()
        #expect(!generated.isEmpty)
        if ProcessInfo.processInfo.environment["RECEIPTS_REGENERATE_CLIENT"] == "1" {
            try FileManager.default.createDirectory(at: Self.generatedDirectory, withIntermediateDirectories: true)
            for (name, contents) in generated {
                try Data(contents.utf8).write(to: Self.generatedDirectory.appendingPathComponent(name))
            }
        }
        let committed = try FileManager.default.contentsOfDirectory(atPath: Self.generatedDirectory.path).filter { $0.hasSuffix(".swift") }
        #expect(Set(committed) == Set(generated.keys), "the generated files' names changed: regenerate (see this test's comment)")
        for (name, contents) in generated.sorted(by: { $0.key < $1.key }) {
            let file = Self.generatedDirectory.appendingPathComponent(name)
            let onDisk = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            #expect(onDisk == contents, "\(name) is not what the generator makes of openapi.yaml: regenerate (see this test's comment)")
        }
    }

    @Test("the generated client has an operation for every path and method of openapi.yaml")
    func everyPathHasAnOperation() throws {
        let documented = try ContractPaths.operations(in: String(contentsOf: Self.document, encoding: .utf8))
        #expect(documented.count >= 20)
        let client = try String(contentsOf: Self.generatedDirectory.appendingPathComponent("Client.swift"), encoding: .utf8)
        let generated = ContractPaths.operations(inGeneratedClient: client)
        for operation in documented {
            #expect(generated.contains(operation), "no generated operation for \(operation.method) \(operation.path)")
        }
        #expect(generated.count == documented.count, "generated: \(generated.sorted()), documented: \(documented.sorted())")
    }
}

/// Collects the generator's diagnostics; errors fail the generation, warnings are printed.
final class RecordingDiagnostics: DiagnosticCollector, Sendable {
    func emit(_ diagnostic: Diagnostic) throws {
        if diagnostic.severity == .error { throw diagnostic }
        if diagnostic.severity == .warning { print("generator: \(diagnostic.description)") }
    }
}
