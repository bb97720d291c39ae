import Foundation

/// The figures of one run, printed as a table and written as JSON.
struct BenchResults {
    struct Row: Codable {
        let name: String
        let unit: String
        let value: Double
        let p50: Double?
        let p95: Double?
        let p99: Double?
        let target: String
        let note: String
    }

    private(set) var rows: [Row] = []

    mutating func add(_ name: String, unit: String, value: Double, target: String, note: String = "") {
        self.rows.append(Row(name: name, unit: unit, value: value, p50: nil, p95: nil, p99: nil, target: target, note: note))
    }

    /// Adds repeated measurements of one figure: `value` is their median, the note gives the
    /// range (single samples on a shared 2-core machine vary by tens of percent).
    mutating func add(_ name: String, unit: String, samples: [Double], target: String, note: String = "") {
        let sorted = samples.sorted()
        let median = Self.median(samples)
        let range = sorted.isEmpty ? "" : String(format: "median of %d (%.0f–%.0f)", sorted.count, sorted[0], sorted[sorted.count - 1])
        self.add(name, unit: unit, value: median, target: target, note: [range, note].filter { !$0.isEmpty }.joined(separator: "; "))
    }

    /// Adds a latency distribution (milliseconds); `value` is the median.
    mutating func add(_ name: String, latencies: [Double], target: String, note: String = "") {
        let sorted = latencies.sorted()
        func percentile(_ q: Double) -> Double { sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(q * Double(sorted.count)))] }
        self.rows.append(Row(
            name: name, unit: "ms", value: percentile(0.5), p50: percentile(0.5), p95: percentile(0.95), p99: percentile(0.99),
            target: target, note: note.isEmpty ? "n=\(sorted.count)" : note
        ))
    }

    /// The median of repeated measurements, as `add(_:unit:samples:target:note:)` reports it
    /// (the upper one of an even count).
    static func median(_ samples: [Double]) -> Double {
        let sorted = samples.sorted()
        return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
    }

    /// The value of the row named `name` added earlier in this run, if there is one: for a
    /// figure that is judged against another one measured in the same run (the VM's speed
    /// moves 20–40 % between runs, so only ratios within one run compare).
    func value(of name: String) -> Double? {
        self.rows.last { $0.name == name }?.value
    }

    func table() -> String {
        func format(_ value: Double?) -> String {
            guard let value else { return "" }
            return value >= 100 ? String(format: "%.0f", value) : String(format: "%.2f", value)
        }
        let header = ["figure", "value", "unit", "p50", "p95", "p99", "target", "note"]
        let lines = self.rows.map { row in
            [row.name, format(row.value), row.unit, format(row.p50), format(row.p95), format(row.p99), row.target, row.note]
        }
        let widths = header.indices.map { column in ([header] + lines).map { $0[column].count }.max() ?? 0 }
        func render(_ cells: [String]) -> String {
            zip(cells, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: " | ")
        }
        return ([render(header), widths.map { String(repeating: "-", count: $0) }.joined(separator: "-|-")] + lines.map(render))
            .joined(separator: "\n")
    }

    func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(self.rows)
    }
}
