import HTTPTypes
import Postgres

/// `Receipts-Consistency-Token`: what a write answer carries and a read may send back, so
/// that the read shows at least that write (docs/api.md, "Read-your-writes").
///
/// Opaque to callers. Inside: the primary's log position once the write had committed, as
/// `r1.` and 16 hexadecimal digits (the `1` versions the form).
struct ConsistencyToken: Equatable, Sendable, CustomStringConvertible {
    static let headerName = HTTPField.Name("Receipts-Consistency-Token")!
    /// `Receipts-Read-Source` on the answers of the reads a standby may serve.
    static let readSourceHeaderName = HTTPField.Name("Receipts-Read-Source")!

    private static let prefix = "r1."

    let position: WALPosition

    init(_ position: WALPosition) {
        self.position = position
    }

    /// Parses a token this service made; nil for anything else.
    init?(_ text: String) {
        guard text.utf8.count == Self.prefix.utf8.count + 16, text.hasPrefix(Self.prefix) else { return nil }
        let digits = text.utf8.dropFirst(Self.prefix.utf8.count)
        guard digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0) }),
            let offset = UInt64(String(Substring(digits)), radix: 16)
        else { return nil }
        self.position = WALPosition(offset: offset)
    }

    var description: String {
        let digits = String(self.position.offset, radix: 16, uppercase: true)
        return Self.prefix + String(repeating: "0", count: 16 - digits.count) + digits
    }
}
