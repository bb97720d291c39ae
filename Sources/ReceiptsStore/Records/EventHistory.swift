/// The histories of the event log that led to the current one (`receipts.event_histories`,
/// sql/functions/histories.sql), and what they make of event ids.
///
/// A failover that loses an asynchronous tail makes the new primary hand out event ids again
/// for other events, so a stream position names its history: an event id is its number alone
/// in the first history, and `<number>.<history id>` in every later one. A position of an
/// earlier history still means the same in the current one up to that history's
/// `resumableThrough` (every event up to it is here, and no other); past it, a client may have
/// seen events this database never had, and `position(of:)` says so (the stream then answers
/// `resync.required`).
///
/// Pure: the lineage in, ids and positions out.
public struct EventHistory: Sendable, Equatable {
    /// One history of the lineage.
    public struct Segment: Sendable, Equatable {
        /// Random (12 lowercase hex digits); shown after the number in the ids of every
        /// history but the first.
        public let id: String
        /// Event ids above this were handed out in this history; at or below it, in an earlier one.
        public let startedAfter: Int64
        /// Positions of earlier histories up to here mean the same in this one.
        public let resumableThrough: Int64

        public init(id: String, startedAfter: Int64, resumableThrough: Int64) {
            self.id = id
            self.startedAfter = startedAfter
            self.resumableThrough = resumableThrough
        }
    }

    /// Oldest first; the last is the current history. Never empty.
    public let segments: [Segment]

    /// - Precondition: `segments` is not empty.
    public init(segments: [Segment]) {
        precondition(!segments.isEmpty, "an event log has at least its first history")
        self.segments = segments
    }

    /// The current history's id.
    public var currentId: String { self.segments[self.segments.count - 1].id }

    /// The id of the event (or position) `position` of the current history: the number alone
    /// while it means the same in the first history, else the number and the newest history
    /// from which on it does.
    public func eventId(_ position: Int64) -> String {
        Self.eventId(position, segments: self.segments[...])
    }

    /// The id of `position`, a position while `history` was the current one, as it was named
    /// then (a webhook's stored position): given back, it resumes where the position still
    /// means the same, and answers `resync.required` where it does not.
    public func eventId(_ position: Int64, currentIn history: String) -> String {
        guard let index = self.segments.firstIndex(where: { $0.id == history }) else { return "\(position).\(history)" }
        return Self.eventId(position, segments: self.segments[...index])
    }

    /// A position of some history, as a client or a webhook row gives it.
    public enum Resolved: Equatable, Sendable {
        /// The same position in the current history.
        case position(Int64)
        /// A position of an earlier history past what a later one kept (a failover lost
        /// events): the client may hold events this database does not have. Up to
        /// `keptThrough`, the earlier history's positions mean the same here.
        case lost(keptThrough: Int64)
        /// Malformed, or of a history this lineage does not have.
        case unknown
    }

    /// What an event id given back by a client means here.
    public func position(of eventId: some StringProtocol) -> Resolved {
        guard let parsed = Self.parse(eventId) else { return .unknown }
        let index: Int
        if let history = parsed.history {
            guard let found = self.segments.firstIndex(where: { $0.id == history }) else { return .unknown }
            index = found
        } else {
            index = 0
        }
        // A later history's number at or below its resumableThrough is named by an earlier one:
        // never handed out in this form.
        if index > 0 && parsed.number <= self.segments[index].resumableThrough { return .unknown }
        let kept = self.segments[(index + 1)...].map(\.resumableThrough).min() ?? .max
        return parsed.number <= kept ? .position(parsed.number) : .lost(keptThrough: kept)
    }

    /// What `position`, a position while `history` was the current one (a webhook's stored
    /// position, a stream's position in the hub before a failover), means here.
    public func position(_ position: Int64, currentIn history: String) -> Resolved {
        guard let index = self.segments.firstIndex(where: { $0.id == history }) else { return .unknown }
        return self.position(of: Self.eventId(position, segments: self.segments[...index]))
    }

    /// The newest position of `history` (while it was the current one) that means the same
    /// here: every later history's `resumableThrough`, the lowest; `Int64.max` for the current
    /// history, nil for one this lineage does not have.
    public func keptThrough(currentIn history: String) -> Int64? {
        guard let index = self.segments.firstIndex(where: { $0.id == history }) else { return nil }
        return self.segments[(index + 1)...].map(\.resumableThrough).min() ?? .max
    }

    /// Where the event ids of `history` end: its successor's `startedAfter` (ids above it are
    /// of later histories), `Int64.max` for the current one or one this lineage does not have.
    public func idsEnd(of history: String) -> Int64 {
        guard let index = self.segments.firstIndex(where: { $0.id == history }), index + 1 < self.segments.count else {
            return .max
        }
        return self.segments[index + 1].startedAfter
    }

    private static func eventId(_ position: Int64, segments: ArraySlice<Segment>) -> String {
        // The newest history that began after a position it did not keep (its resumableThrough
        // below `position`) names it; none (always for the first): the number alone.
        guard let index = segments.indices.dropFirst().last(where: { segments[$0].resumableThrough < position }) else {
            return String(position)
        }
        return "\(position).\(segments[index].id)"
    }

    /// `<number>` or `<number>.<history>`: digits, then optionally a dot and 1-16 lowercase
    /// hex digits. Nil for anything else.
    static func parse(_ eventId: some StringProtocol) -> (number: Int64, history: String?)? {
        let parts = eventId.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let digits = parts.first, !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            let number = Int64(digits)
        else { return nil }
        guard parts.count == 2 else { return (number, nil) }
        let history = parts[1]
        guard (1...16).contains(history.utf8.count), history.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) })
        else { return nil }
        return (number, String(history))
    }
}
