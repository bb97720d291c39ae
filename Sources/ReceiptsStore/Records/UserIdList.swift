import Postgres

/// User ids in a stored order (`MessageRecord.deliveredTo`, `.readBy`): `String`s, or, on a
/// page of messages, the elements of the text arrays as the database sent them.
///
/// A page of a 1,000-member group's messages holds some 100,000 user ids; they are written
/// out as JSON straight from the result's bytes (the package's JSON writer reads them through
/// `forEachUTF8`), without a `String` for each.
public struct UserIdList: Sendable {
    private enum Storage: Sendable {
        case strings([String])
        /// The arrays one after another.
        case stored([PostgresTextElements])
    }

    private let storage: Storage
    /// Whether the ids are the database's bytes and every one is a valid id (`Identifier`), as
    /// every stored id is: such a list is written into JSON as its bytes are, with no escapes.
    /// Checked as the rows arrived, off the answer's critical path. False for `String`s.
    package let areStoredIdentifiers: Bool

    /// The ids `ids`.
    public init(_ ids: [String]) {
        self.storage = .strings(ids)
        self.areStoredIdentifiers = false
    }

    /// The elements of `arrays`, one array after another.
    init(stored arrays: [PostgresTextElements], areIdentifiers: Bool) {
        self.storage = .stored(arrays)
        self.areStoredIdentifiers = areIdentifiers
    }

    /// How many ids there are.
    public var count: Int {
        switch self.storage {
        case .strings(let ids): ids.count
        case .stored(let arrays): arrays.reduce(0) { $0 + $1.count }
        }
    }

    /// The ids as `String`s.
    public var strings: [String] {
        switch self.storage {
        case .strings(let ids): ids
        case .stored(let arrays): arrays.flatMap(\.strings)
        }
    }

    /// How many UTF-8 bytes the ids have, all together.
    package var byteCount: Int {
        switch self.storage {
        case .strings(let ids): ids.reduce(0) { $0 + $1.utf8.count }
        case .stored(let arrays): arrays.reduce(0) { $0 + $1.byteCount }
        }
    }

    /// Calls `body` with each id's UTF-8 bytes, in order; they are valid only during the call.
    package func forEachUTF8(_ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        switch self.storage {
        case .strings(let ids):
            for var id in ids {
                try id.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
            }
        case .stored(let arrays):
            for array in arrays {
                try array.forEach(body)
            }
        }
    }
}

/// As a JSON array of strings (an encoder that knows the type writes it from the bytes).
extension UserIdList: Encodable {
    public func encode(to encoder: any Encoder) throws {
        try self.strings.encode(to: encoder)
    }
}
