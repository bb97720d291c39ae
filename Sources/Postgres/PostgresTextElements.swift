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

    /// No elements.
    public init() {
        self.elements = []
        self.count = 0
    }

    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> PostgresTextElements {
        var reader = BinaryReader(bytes)
        guard let dimensions = reader.readInteger(as: Int32.self),
            reader.readInteger(as: Int32.self) != nil,  // has-null flag
            let elementOID = reader.readInteger(as: UInt32.self)
        else { throw .malformed(type) }
        let elementType = PostgresDataType(oid: elementOID)
        guard [.text, .varchar, .bpchar, .name].contains(elementType), elementType.arrayType == type || type == .textArray else {
            throw .mismatch(type, PostgresTextElements.self)
        }
        if dimensions == 0 { return PostgresTextElements() }
        guard dimensions == 1,
            let count = reader.readInteger(as: Int32.self), count >= 0,
            reader.readInteger(as: Int32.self) != nil  // lower bound
        else {
            throw PostgresError(code: .invalidValue, message: "only one-dimensional arrays can be decoded")
        }
        let elements = reader.remainingBytes
        // Checked once here, so that `forEach` can read the lengths without checking them.
        let isWhole = elements.withUnsafeBytes { bytes in
            var offset = 0
            for _ in 0..<Int(count) {
                guard offset + 4 <= bytes.count else { return false }
                let length = Int(Int32(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)))
                guard length >= 0 else { return false }  // NULL elements: not text
                offset += 4 + length
            }
            return offset == bytes.count
        }
        guard isWhole else { throw .malformed(type) }
        return PostgresTextElements(elements: elements, count: Int(count))
    }

    private init(elements: ArraySlice<UInt8>, count: Int) {
        self.elements = elements
        self.count = count
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
