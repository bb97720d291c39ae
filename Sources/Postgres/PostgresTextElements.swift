/// The elements of a one-dimensional text array (`text[]`, `varchar[]`, …) as the server sent
/// them: each element's UTF-8 bytes, read in place in the result, without a `String` for each.
///
/// For results where making the strings is most of the work: a page of a large group's
/// messages holds some 100,000 user ids, which are counted and written out as JSON and never
/// needed as `String`s. The value keeps the result's bytes alive as long as it lives. NULL
/// elements are refused when it is decoded (`[String?]` reads those).
public struct PostgresTextElements: PostgresDecodable, Sendable {
    /// The elements: each a 4-byte big-endian length, then that many bytes.
    private let elements: ArraySlice<UInt8>
    /// How many elements there are.
    public let count: Int

    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> PostgresTextElements {
        let array = try BinaryArray(bytes, type: type, as: PostgresTextElements.self) { elementType in
            BinaryArray.textTypes.contains(elementType) && (elementType.arrayType == type || type == .textArray)
        }
        return try PostgresTextElements(array, type: type)
    }

    /// The elements of `array`, whose elements are text; its lengths are checked once here, so
    /// that `forEach` can read them without checking them.
    init(_ array: BinaryArray, type: PostgresDataType) throws(PostgresError) {
        let isWhole = array.elements.withUnsafeBytes { bytes in
            var offset = 0
            for _ in 0..<array.count {
                guard offset + 4 <= bytes.count else { return false }
                let length = Int(Int32(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)))
                guard length >= 0 else { return false }  // NULL elements: not text
                offset += 4 + length
            }
            return offset == bytes.count
        }
        guard isWhole else { throw .malformed(type) }
        self.elements = array.elements
        self.count = array.count
    }

    /// How many bytes the elements have, all together.
    public var byteCount: Int { self.elements.count - 4 * self.count }

    /// Calls `body` with each element's UTF-8 bytes, in order; they are valid only during the call.
    public func forEach(_ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        try self.elements.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let length = Int(Int32(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)))
                offset += 4
                try body(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)]))
                offset += length
            }
        }
    }

    /// The elements as `String`s.
    public var strings: [String] {
        var strings: [String] = []
        strings.reserveCapacity(self.count)
        self.forEach { strings.append(String(decoding: $0, as: UTF8.self)) }
        return strings
    }
}
