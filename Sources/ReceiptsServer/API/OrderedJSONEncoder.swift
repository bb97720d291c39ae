import Foundation
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
struct OrderedJSONEncoder {
    /// Appends `value`'s JSON to `writer`.
    static func write(_ value: some Encodable, to writer: inout JSONWriter) throws {
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
            } else if let integer = value as? any BinaryInteger {
                self.writer.integer(integer)
            } else if let number = value as? Double {
                try self.writer.number(number)
            } else if let number = value as? Float {
                try self.writer.number(Double(number))
            } else {
                let before = self.writer.bytes.count
                try value.encode(to: ValueEncoder(encoding: self, depth: depth))
                self.close(downTo: depth)
                // A value that encoded nothing at all (no container): an empty object, as
                // `JSONEncoder` writes it.
                if self.writer.bytes.count == before { self.writer.raw("{}") }
            }
        }

        func encodeNil() { self.writer.raw("null") }
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
        mutating func encode(_ value: Bool, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: String, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: Double, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: Float, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: Int, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { try self.put(value, key) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { try self.put(value, key) }

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

    fileprivate struct UnkeyedContainer: UnkeyedEncodingContainer, PrimitivesThroughPut {
        let encoding: Encoding
        /// Its own depth: the number of containers open with it, itself included.
        let depth: Int
        var codingPath: [any CodingKey] { [] }
        var count: Int { self.encoding.open.count >= self.depth ? self.encoding.open[self.depth - 1].count : 0 }

        mutating func encodeNil() throws {
            self.encoding.beginElement(of: self.depth)
            self.encoding.encodeNil()
        }

        mutating func encode<T: Encodable>(_ value: T) throws { try self.put(value) }

        func put<T: Encodable>(_ value: T) throws {
            self.encoding.beginElement(of: self.depth)
            try self.encoding.encode(value, depth: self.depth)
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

    fileprivate struct SingleValueContainer: SingleValueEncodingContainer, PrimitivesThroughPut {
        let encoding: Encoding
        /// The containers open around the value.
        let depth: Int
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil() throws { self.encoding.encodeNil() }

        mutating func encode<T: Encodable>(_ value: T) throws { try self.put(value) }

        func put<T: Encodable>(_ value: T) throws {
            try self.encoding.encode(value, depth: self.depth)
        }

    }
}

/// A container whose values of every kind go through its one `put`, as the keyed one's do.
private protocol PrimitivesThroughPut {
    func put<T: Encodable>(_ value: T) throws
}

extension PrimitivesThroughPut {
    mutating func encode(_ value: Bool) throws { try self.put(value) }
    mutating func encode(_ value: String) throws { try self.put(value) }
    mutating func encode(_ value: Double) throws { try self.put(value) }
    mutating func encode(_ value: Float) throws { try self.put(value) }
    mutating func encode(_ value: Int) throws { try self.put(value) }
    mutating func encode(_ value: Int8) throws { try self.put(value) }
    mutating func encode(_ value: Int16) throws { try self.put(value) }
    mutating func encode(_ value: Int32) throws { try self.put(value) }
    mutating func encode(_ value: Int64) throws { try self.put(value) }
    mutating func encode(_ value: UInt) throws { try self.put(value) }
    mutating func encode(_ value: UInt8) throws { try self.put(value) }
    mutating func encode(_ value: UInt16) throws { try self.put(value) }
    mutating func encode(_ value: UInt32) throws { try self.put(value) }
    mutating func encode(_ value: UInt64) throws { try self.put(value) }
}
