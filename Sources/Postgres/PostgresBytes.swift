/// A `bytea` value: raw bytes.
public struct PostgresBytes: Sendable, Hashable, PostgresEncodable, PostgresDecodable {
    public var bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public static var postgresType: PostgresDataType { .bytea }

    /// bytea's hex input form, `\x0a1b…`.
    public var postgresText: String? {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        text.reserveCapacity(2 + self.bytes.count * 2)
        for byte in self.bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    public static func decode(from bytes: ArraySlice<UInt8>, type: PostgresDataType) throws(PostgresError) -> PostgresBytes {
        guard type == .bytea else { throw .mismatch(type, PostgresBytes.self) }
        return PostgresBytes(Array(bytes))
    }
}
