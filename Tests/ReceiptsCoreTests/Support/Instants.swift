import Foundation
import Testing

/// Fixed instants, written as RFC 3339 so a test's expected clock text is easy to check.
enum Instants {
    /// 2024-07-15 12:00 UTC, the default time of fixture receipts.
    static let noon = utc("2024-07-15T12:00:00Z")

    /// The instant `text` (RFC 3339, e.g. `2024-07-15T17:42:00Z`) names.
    static func utc(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> Date {
        guard let date = try? Date(text, strategy: .iso8601) else {
            Issue.record("not an RFC 3339 instant: \(text)", sourceLocation: sourceLocation)
            return .distantPast
        }
        return date
    }
}
