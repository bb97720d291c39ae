import struct Foundation.Date
import struct Foundation.UUID

/// A Swift value that can be read from a result column.
///
/// Results arrive in PostgreSQL's binary format, which does not depend on session settings
/// such as `DateStyle` or `TimeZone`. Each conformance checks the column type and refuses
/// a mismatch instead of guessing.
public protocol PostgresDecodable: Sendable {
    /// Decodes a non-NULL value from its binary wire form.
    static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> Self
    /// The value for SQL NULL; non-optional types throw `unexpectedNull`.
    static func decodeNull() throws(PostgresError) -> Self
}

extension PostgresDecodable {
    public static func decodeNull() throws(PostgresError) -> Self {
        throw PostgresError(code: .unexpectedNull, message: "NULL where a \(Self.self) was expected")
    }
}

extension PostgresError {
    static func mismatch(_ type: PostgresDataType, _ swiftType: Any.Type) -> PostgresError {
        PostgresError(code: .typeMismatch, message: "cannot decode a \(type) column as \(swiftType)")
    }

    static func malformed(_ type: PostgresDataType) -> PostgresError {
        PostgresError(code: .invalidValue, message: "malformed binary \(type) value")
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> Self {
        try Wrapped.decode(from: bytes, type: type)
    }

    public static func decodeNull() throws(PostgresError) -> Self { nil }
}

extension String: PostgresDecodable {
    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> String {
        switch type {
        case .text, .varchar, .bpchar, .name, .unknown, .json:
            return String(decoding: bytes, as: UTF8.self)
        case .jsonb:
            // jsonb's binary form is a version byte (1) followed by the JSON text.
            guard bytes.first == 1 else { throw .malformed(type) }
            return String(decoding: bytes.dropFirst(), as: UTF8.self)
        default:
            throw .mismatch(type, String.self)
        }
    }
}

extension PostgresJSON: PostgresDecodable {
    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> PostgresJSON {
        guard type == .json || type == .jsonb else { throw .mismatch(type, PostgresJSON.self) }
        return PostgresJSON(try String.decode(from: bytes, type: type))
    }
}

extension Int64: PostgresDecodable {
    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> Int64 {
        var reader = BinaryReader(bytes)
        let value: Int64? =
            switch type {
            case .int8: reader.readInteger(as: Int64.self)
            case .int4: reader.readInteger(as: Int32.self).map(Int64.init)
            case .int2: reader.readInteger(as: Int16.self).map(Int64.init)
            default: throw .mismatch(type, Int64.self)
            }
        guard let value, reader.isAtEnd else { throw .malformed(type) }
        return value
    }
}

extension Int: PostgresDecodable {
    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> Int {
        guard [.int2, .int4, .int8].contains(type) else { throw .mismatch(type, Int.self) }
        return Int(try Int64.decode(from: bytes, type: type))
    }
}

extension Int32: PostgresDecodable {
    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> Int32 {
        guard type == .int4 || type == .int2 else { throw .mismatch(type, Int32.self) }
        return Int32(try Int64.decode(from: bytes, type: type))
    }
}

extension Bool: PostgresDecodable {
    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> Bool {
        guard type == .bool else { throw .mismatch(type, Bool.self) }
        guard bytes.count == 1, let byte = bytes.first else { throw .malformed(type) }
        return byte != 0
    }
}

extension Double: PostgresDecodable {
    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> Double {
        var reader = BinaryReader(bytes)
        let value: Double? =
            switch type {
            case .float8: reader.readInteger(as: UInt64.self).map(Double.init(bitPattern:))
            case .float4: reader.readInteger(as: UInt32.self).map { Double(Float(bitPattern: $0)) }
            default: throw .mismatch(type, Double.self)
            }
        guard let value, reader.isAtEnd else { throw .malformed(type) }
        return value
    }
}

extension Date: PostgresDecodable {
    /// Seconds from the Unix epoch to PostgreSQL's epoch, 2000-01-01 00:00:00 UTC.
    static let postgresEpochOffset: Double = 946_684_800

    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> Date {
        guard type == .timestamptz else { throw .mismatch(type, Date.self) }
        var reader = BinaryReader(bytes)
        guard let microseconds = reader.readInteger(as: Int64.self), reader.isAtEnd else {
            throw .malformed(type)
        }
        return Date(postgresMicroseconds: microseconds)
    }

    /// The time of a `timestamptz` in its binary form: microseconds since 2000-01-01 UTC,
    /// with `infinity` and `-infinity` at the ends of the range.
    init(postgresMicroseconds microseconds: Int64) {
        switch microseconds {
        case .max: self = .distantFuture
        case .min: self = .distantPast
        default: self = Date(timeIntervalSince1970: Double(microseconds) / 1_000_000 + Self.postgresEpochOffset)
        }
    }
}

extension UUID: PostgresDecodable {
    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> UUID {
        guard type == .uuid else { throw .mismatch(type, UUID.self) }
        guard bytes.count == 16 else { throw .malformed(type) }
        let b = Array(bytes)
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                           b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }
}

/// One-dimensional arrays (`text[]`, `int8[]`, …); use `[String?]` when elements may be NULL.
extension Array: PostgresDecodable where Element: PostgresDecodable {
    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> [Element] {
        let array = try BinaryArray(bytes, type: type, as: [Element].self) { elementType in
            elementType.arrayType == type || (type == .textArray && elementType == .text)
        }
        if Element.self == String.self, array.holdsText {
            // Read straight from memory (a page of a large group holds 100,000 ids, and the
            // generic path's slice and call per element were most of their cost). Element is
            // String: the cast changes nothing but the static type.
            return unsafeBitCast(try PostgresTextElements(array, type: type).strings, to: [Element].self)
        }
        if Element.self == Date.self, array.elementType == .timestamptz {
            // Element is Date: the cast changes nothing but the static type.
            return unsafeBitCast(try Self.decodeTimestamps(array.elements, count: array.count, type: type), to: [Element].self)
        }
        var reader = BinaryReader(array.elements)
        var elements: [Element] = []
        elements.reserveCapacity(array.count)
        for _ in 0..<array.count {
            guard let length = reader.readInteger(as: Int32.self) else { throw .malformed(type) }
            if length < 0 {
                elements.append(try Element.decodeNull())
            } else {
                guard let slice = reader.readBytes(Int(length)) else { throw .malformed(type) }
                elements.append(try Element.decode(from: slice, type: array.elementType))
            }
        }
        guard reader.isAtEnd else { throw .malformed(type) }
        return elements
    }

    /// The `count` times of a `timestamptz[]`'s elements (`bytes`: each a 4-byte length of 8,
    /// then the microseconds since 2000), read straight from memory as `PostgresTextElements` reads texts.
    private static func decodeTimestamps(_ bytes: ArraySlice<UInt8>, count: Int, type: PostgresDataType) throws(PostgresError) -> [Date] {
        guard bytes.count == count * 12 else { throw .malformed(type) }
        let dates: [Date]? = bytes.withUnsafeBytes { bytes in
            var dates: [Date] = []
            dates.reserveCapacity(count)
            for index in 0..<count {
                guard Int32(bigEndian: bytes.loadUnaligned(fromByteOffset: index * 12, as: Int32.self)) == 8 else { return nil }
                dates.append(Date(postgresMicroseconds: Int64(bigEndian: bytes.loadUnaligned(fromByteOffset: index * 12 + 4, as: Int64.self))))
            }
            return dates
        }
        guard let dates else { throw .malformed(type) }
        return dates
    }
}

/// A one-dimensional array in PostgreSQL's binary form: its element type, how many elements
/// it has, and their bytes (each a 4-byte big-endian length, -1 for NULL, then that many bytes).
struct BinaryArray {
    let elementType: PostgresDataType
    let count: Int
    let elements: ArraySlice<UInt8>

    /// The element types whose values are text.
    static let textTypes: [PostgresDataType] = [.text, .varchar, .bpchar, .name]

    /// Reads the array's header; `accepts` says whether its element type may become `swiftType`.
    init(
        _ bytes: ArraySlice<UInt8>, type: PostgresDataType, as swiftType: Any.Type, accepting accepts: (PostgresDataType) -> Bool
    ) throws(PostgresError) {
        var reader = BinaryReader(bytes)
        guard let dimensions = reader.readInteger(as: Int32.self),
            reader.readInteger(as: Int32.self) != nil,  // has-null flag
            let elementOID = reader.readInteger(as: UInt32.self)
        else { throw .malformed(type) }
        self.elementType = PostgresDataType(oid: elementOID)
        guard accepts(self.elementType) else { throw .mismatch(type, swiftType) }
        if dimensions == 0 {
            self.count = 0
            self.elements = []
            return
        }
        guard dimensions == 1,
            let count = reader.readInteger(as: Int32.self), count >= 0,
            reader.readInteger(as: Int32.self) != nil  // lower bound
        else {
            throw PostgresError(code: .invalidValue, message: "only one-dimensional arrays can be decoded")
        }
        self.count = Int(count)
        self.elements = reader.remainingBytes
    }

    /// Whether its elements are text.
    var holdsText: Bool { Self.textTypes.contains(self.elementType) }
}

/// Reads big-endian integers and byte runs from a binary value.
struct BinaryReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    var isAtEnd: Bool { self.bytes.isEmpty }

    mutating func readInteger<T: FixedWidthInteger>(as type: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard self.bytes.count >= size else { return nil }
        var value: T = 0
        for byte in self.bytes.prefix(size) { value = value << 8 | T(truncatingIfNeeded: byte) }
        self.bytes = self.bytes.dropFirst(size)
        return value
    }

    /// What is left to read.
    var remainingBytes: ArraySlice<UInt8> { self.bytes }

    mutating func readBytes(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, self.bytes.count >= count else { return nil }
        defer { self.bytes = self.bytes.dropFirst(count) }
        return self.bytes.prefix(count)
    }
}
