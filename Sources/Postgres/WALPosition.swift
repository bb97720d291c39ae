/// A position in PostgreSQL's write-ahead log (a `pg_lsn`): where a commit ended on the
/// primary, or how far a standby has replayed. Positions of one cluster compare across
/// failovers (a promoted standby continues the log on a new timeline), so a standby that has
/// replayed past a commit's position shows that commit.
public struct WALPosition: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// The byte offset in the log.
    public let offset: UInt64

    public init(offset: UInt64) {
        self.offset = offset
    }

    /// Parses PostgreSQL's text form, `16/B374D848` (two hexadecimal halves of at most 8
    /// digits each); nil for anything else.
    public init?(_ text: some StringProtocol) {
        let halves = text.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, halves.allSatisfy({ (1...8).contains($0.count) }),
            let high = UInt64(halves[0], radix: 16), let low = UInt64(halves[1], radix: 16)
        else { return nil }
        self.offset = high << 32 | low
    }

    /// PostgreSQL's text form (`16/B374D848`), which `::pg_lsn` casts back.
    public var description: String {
        String(self.offset >> 32, radix: 16, uppercase: true) + "/" + String(self.offset & 0xFFFF_FFFF, radix: 16, uppercase: true)
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.offset < rhs.offset }
}
