import Foundation
import TestSupport
import Testing

/// The repository's Markdown links to its own files and their sections: a file moved or a
/// heading renamed (BENCHMARKS.md's run records went to docs/benchmarks-history.md) must not
/// leave a link that leads nowhere.
@Suite("Document links")
struct DocumentLinksTests {
    /// Every `.md` file of the repository, outside hidden folders (`.build`, `.receipts`).
    static func markdownFiles() -> [String] {
        let root = TestDatabase.packageRoot.path
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        var files: [String] = []
        while let path = walker.nextObject() as? String {
            if path.split(separator: "/").contains(where: { $0.hasPrefix(".") }) {
                walker.skipDescendants()
                continue
            }
            if path.hasSuffix(".md") { files.append(path) }
        }
        return files.sorted()
    }

    /// The anchors GitHub gives the headings of `markdown` (lower case, punctuation dropped,
    /// spaces as hyphens), code blocks left out.
    static func anchors(of markdown: String) -> Set<String> {
        var anchors: Set<String> = []
        var inCode = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode, let heading = line.wholeMatch(of: #/#{1,6} (.+)/#)?.output.1 else { continue }
            let kept = heading.lowercased().unicodeScalars.filter {
                CharacterSet.alphanumerics.contains($0) || $0 == " " || $0 == "-" || $0 == "_"
            }
            anchors.insert(String(kept).replacingOccurrences(of: " ", with: "-"))
        }
        return anchors
    }

    @Test("every relative link of the Markdown files reaches a file, and its #anchor a heading of it")
    func relativeLinksResolve() throws {
        let root = TestDatabase.packageRoot
        let files = Self.markdownFiles()
        #expect(files.contains("README.md") && files.contains("docs/architecture.md"), "\(files)")
        for file in files {
            let url = root.appendingPathComponent(file)
            let text = try String(contentsOf: url, encoding: .utf8)
            for match in text.matches(of: #/\]\(([^)\s]+)\)/#) {
                let link = String(match.output.1)
                guard !link.contains("://"), !link.hasPrefix("mailto:") else { continue }
                let parts = link.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let target = parts[0].isEmpty ? url : url.deletingLastPathComponent().appendingPathComponent(String(parts[0])).standardizedFileURL
                guard FileManager.default.fileExists(atPath: target.path) else {
                    Issue.record("\(file): \(link) leads to no file")
                    continue
                }
                guard parts.count == 2, target.pathExtension == "md" else { continue }
                let isHeading = Self.anchors(of: try String(contentsOf: target, encoding: .utf8)).contains(String(parts[1]))
                #expect(isHeading, "\(file): \(link) names no heading of \(target.lastPathComponent)")
            }
        }
    }
}
