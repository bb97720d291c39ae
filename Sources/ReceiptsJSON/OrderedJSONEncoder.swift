import Foundation
import ReceiptsCore
import ReceiptsStore

/// Writes an `Encodable` value as JSON into a `JSONWriter`, members in the order the value
/// encodes them: for a synthesized `Encodable`, the order its properties are declared in, which
/// is the documented order of every answer (`JSONResponse`). `JSONEncoder` on Linux keeps an
/// object's members in a dictionary, so its order is not fixed.
///
/// What the contract says of values, it does here once:
/// - a `nil` member is written `null`, also through `encodeIfPresent` (which is what a
///   synthesized `Encodable` calls for an optional): the contract's optional members are null
///   when unknown (`readAt`), not absent; a type that leaves a member out writes its own
///   `encode(to:)` and skips it;
/// - a `Date` is written in the contract's form (`JSONCoding.timestamp`);
/// - strings, lists of strings and the database's lists of ids (`UserIdList`) take
///   `JSONWriter`'s fast paths.
///
/// It streams: each member is written as it is encoded, and a container is closed when the
/// one around it goes on (or the value ends), so nothing is built in between.
package struct OrderedJSONEncoder {
    /// Appends `value`'s JSON to `writer`.
    package static func write(_ value: some Encodable, to writer: inout JSONWriter) throws {
        let encoding = Encoding(writer: writer)
        writer = JSONWriter(capacity: 0)  // the one being written is the encoding's now
        defer { writer = encoding.writer }
        try encoding.encode(value, depth: 0)
    }

    /// What the containers of one `write` share: the writer, and the containers still open.
    fileprivate final class Encoding {
        var writer: JSONWriter
        /// The open containers, outermost first: whether each is an object, and how many
        /// members or elements it has.
        var open: [(isObject: Bool, count: Int)] = []

        init(writer: JSONWriter) {
            self.writer = writer
        }

        /// Closes the containers deeper than `depth` (those of a value that is done).
        func close(downTo depth: Int) {
            while self.open.count > depth {
                self.writer.raw(self.open.removeLast().isObject ? "}" : "]")
            }
        }

        /// Opens an object or an array at `depth`: the value being written there.
        func open(object: Bool, at depth: Int) {
            self.close(downTo: depth)
            self.writer.raw(object ? "{" : "[")
            self.open.append((object, 0))
        }

        /// Before the next member or element of the container open at `depth` (1: the outermost).
        func beginElement(of depth: Int) {
            self.close(downTo: depth)
            if self.open[depth - 1].count > 0 { self.writer.raw(",") }
            self.open[depth - 1].count += 1
        }

        func key(_ key: some CodingKey, of depth: Int) {
            self.beginElement(of: depth)
            self.writer.string(key.stringValue)
            self.writer.raw(":")
        }

        /// Writes `value` where the writer stands, inside `depth` open containers.
        func encode<Value: Encodable>(_ value: Value, depth: Int) throws {
            // Compared by type, not cast: a comparison of two pointers where a cast is a call.
            if Value.self == String.self {
                self.writer.string(unsafeBitCast(value, to: String.self))
            } else if Value.self == Date.self {
                self.writer.timestamp(unsafeBitCast(value, to: Date.self))
            } else if Value.self == [String].self {
                self.writer.strings(unsafeBitCast(value, to: [String].self))
            } else if Value.self == UserIdList.self {
                self.writer.strings(unsafeBitCast(value, to: UserIdList.self))
            } else if Value.self == Int.self {
                self.writer.integer(unsafeBitCast(value, to: Int.self))
            } else if Value.self == Int64.self {
                self.writer.integer(unsafeBitCast(value, to: Int64.self))
            } else if Value.self == Bool.self {
                self.writer.boolean(unsafeBitCast(value, to: Bool.self))
            } else {
                // Any other kind of value, the standard ones included: their `encode(to:)` hands
                // them to a container's `encode(_:)` of their own type, which writes them.
                let before = self.writer.bytes.count
                try value.encode(to: ValueEncoder(encoding: self, depth: depth))
                self.close(downTo: depth)
                // A value that encoded nothing at all (no container): an empty object, as
                // `JSONEncoder` writes it.
                if self.writer.bytes.count == before { self.writer.raw("{}") }
            }
        }

        func encodeNil() { self.writer.raw("null") }

        // A value of a standard kind, as its container's `encode(_:)` of that type gets it.
        func write(_ value: Bool) { self.writer.boolean(value) }
        func write(_ value: String) { self.writer.string(value) }
        func write(_ value: some BinaryInteger) { self.writer.integer(value) }
        func write(_ value: Double) throws { try self.writer.number(value) }
        func write(_ value: Float) throws { try self.writer.number(Double(value)) }
    }

    fileprivate struct ValueEncoder: Encoder {
        let encoding: Encoding
        /// The containers open around the value.
        let depth: Int
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            // Asked again by the same value (a subclass and its superclass): the same object.
            if !(self.encoding.open.count == self.depth + 1 && self.encoding.open[self.depth].isObject) {
                self.encoding.open(object: true, at: self.depth)
            }
            return KeyedEncodingContainer(KeyedContainer(encoding: self.encoding, depth: self.depth + 1))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            self.encoding.open(object: false, at: self.depth)
            return UnkeyedContainer(encoding: self.encoding, depth: self.depth + 1)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            SingleValueContainer(encoding: self.encoding, depth: self.depth)
        }
    }

    fileprivate struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let encoding: Encoding
        /// Its own depth: the number of containers open with it, itself included.
        let depth: Int
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil(forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            self.encoding.encodeNil()
        }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try self.put(value, key) }

        private func put<T: Encodable>(_ value: T, _ key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.encode(value, depth: self.depth)
        }

        // Each kind of value through the one path above.
        mutating func encode(_ value: Bool, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: String, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: Double, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: Float, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: Int, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: Int8, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: Int16, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: Int32, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: Int64, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: UInt, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: UInt8, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: UInt16, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: UInt32, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }
        mutating func encode(_ value: UInt64, forKey key: Key) throws {
            self.encoding.key(key, of: self.depth)
            try self.encoding.write(value)
        }

        // An absent optional is `null` (see the type's comment), for every kind of value.
        mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try self.present(value, key) }
        mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try self.present(value, key) }

        private mutating func present<T: Encodable>(_ value: T?, _ key: Key) throws {
            if let value { try self.put(value, key) } else { try self.encodeNil(forKey: key) }
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type, forKey key: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            self.encoding.key(key, of: self.depth)
            self.encoding.open(object: true, at: self.depth)
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoding: self.encoding, depth: self.depth + 1))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            self.encoding.key(key, of: self.depth)
            self.encoding.open(object: false, at: self.depth)
            return UnkeyedContainer(encoding: self.encoding, depth: self.depth + 1)
        }

        mutating func superEncoder() -> any Encoder {
            self.encoding.key(SuperKey.super, of: self.depth)
            return ValueEncoder(encoding: self.encoding, depth: self.depth)
        }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            self.encoding.key(key, of: self.depth)
            return ValueEncoder(encoding: self.encoding, depth: self.depth)
        }
    }

    private enum SuperKey: String, CodingKey { case `super` }

    fileprivate struct UnkeyedContainer: UnkeyedEncodingContainer, WritesStandardKinds {
        let encoding: Encoding
        /// Its own depth: the number of containers open with it, itself included.
        let depth: Int
        var codingPath: [any CodingKey] { [] }
        var count: Int { self.encoding.open.count >= self.depth ? self.encoding.open[self.depth - 1].count : 0 }

        mutating func encodeNil() throws {
            self.encoding.beginElement(of: self.depth)
            self.encoding.encodeNil()
        }

        mutating func encode<T: Encodable>(_ value: T) throws {
            self.beginElement()
            try self.encoding.encode(value, depth: self.depth)
        }

        func beginElement() {
            self.encoding.beginElement(of: self.depth)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            self.encoding.beginElement(of: self.depth)
            self.encoding.open(object: true, at: self.depth)
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoding: self.encoding, depth: self.depth + 1))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            self.encoding.beginElement(of: self.depth)
            self.encoding.open(object: false, at: self.depth)
            return UnkeyedContainer(encoding: self.encoding, depth: self.depth + 1)
        }

        mutating func superEncoder() -> any Encoder {
            self.encoding.beginElement(of: self.depth)
            return ValueEncoder(encoding: self.encoding, depth: self.depth)
        }
    }

    fileprivate struct SingleValueContainer: SingleValueEncodingContainer, WritesStandardKinds {
        let encoding: Encoding
        /// The containers open around the value.
        let depth: Int
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil() throws { self.encoding.encodeNil() }

        mutating func encode<T: Encodable>(_ value: T) throws {
            try self.encoding.encode(value, depth: self.depth)
        }

        /// A single value has no elements, nor commas.
        func beginElement() {}

    }
}

/// A container whose values of the standard kinds are written as they are, each after
/// `beginElement()` (a comma where one is due).
private protocol WritesStandardKinds {
    var encoding: OrderedJSONEncoder.Encoding { get }
    func beginElement()
}

extension WritesStandardKinds {
    mutating func encode(_ value: Bool) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: String) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: Double) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: Float) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: Int) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: Int8) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: Int16) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: Int32) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: Int64) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: UInt) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: UInt8) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: UInt16) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: UInt32) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
    mutating func encode(_ value: UInt64) throws {
        self.beginElement()
        try self.encoding.write(value)
    }
}
