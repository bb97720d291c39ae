import struct Foundation.Date
import struct Foundation.UUID

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value that can travel to the server as a statement parameter.
///
/// Parameters are always sent out of band (`$1`, `$2`, …) in PostgreSQL's text form, so
/// quotes, backslashes and unicode need no escaping and SQL is never assembled from values.
public protocol PostgresEncodable: Sendable {
    /// The parameter type announced to the server; `.unspecified` lets it infer one.
    static var postgresType: PostgresDataType { get }
    /// The value in PostgreSQL's text input form; `nil` is SQL NULL.
    var postgresText: String? { get }
}

/// The parameters of one statement, with their types and text forms.
struct PostgresBindings: Sendable, Hashable {
    var types: [UInt32] = []
    var values: [String?] = []

    /// - Throws: `invalidValue` for text with a NUL character, which PostgreSQL cannot
    ///   store and libpq would silently cut short.
    init(_ parameters: [any PostgresEncodable]) throws(PostgresError) {
        self.types.reserveCapacity(parameters.count)
        self.values.reserveCapacity(parameters.count)
        for (index, parameter) in parameters.enumerated() {
            let text = parameter.postgresText
            if let text, text.utf8.contains(0) {
                throw PostgresError(
                    code: .invalidValue,
                    message: "parameter $\(index + 1) contains a NUL character, which PostgreSQL text cannot hold"
                )
            }
            self.types.append(type(of: parameter).postgresType.oid)
            self.values.append(text)
        }
    }
}

extension String: PostgresEncodable {
    /// Untyped, like a literal in psql, so a string may stand for a `uuid`, `jsonb` or enum.
    public static var postgresType: PostgresDataType { .unspecified }
    public var postgresText: String? { self }
}

extension Substring: PostgresEncodable {
    public static var postgresType: PostgresDataType { .unspecified }
    public var postgresText: String? { String(self) }
}

extension Int: PostgresEncodable {
    public static var postgresType: PostgresDataType { .int8 }
    public var postgresText: String? { String(self) }
}

extension Int64: PostgresEncodable {
    public static var postgresType: PostgresDataType { .int8 }
    public var postgresText: String? { String(self) }
}

extension Int32: PostgresEncodable {
    public static var postgresType: PostgresDataType { .int4 }
    public var postgresText: String? { String(self) }
}

extension Bool: PostgresEncodable {
    public static var postgresType: PostgresDataType { .bool }
    public var postgresText: String? { self ? "t" : "f" }
}

extension Double: PostgresEncodable {
    public static var postgresType: PostgresDataType { .float8 }
    public var postgresText: String? {
        if self.isNaN { return "NaN" }
        if self.isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return String(self)
    }
}

extension UUID: PostgresEncodable {
    public static var postgresType: PostgresDataType { .uuid }
    public var postgresText: String? { self.uuidString }
}

extension Date: PostgresEncodable {
    public static var postgresType: PostgresDataType { .timestamptz }

    /// ISO 8601 in UTC with microseconds, PostgreSQL's own precision.
    public var postgresText: String? {
        let totalMicroseconds = (self.timeIntervalSince1970 * 1_000_000).rounded()
        guard totalMicroseconds.isFinite, abs(totalMicroseconds) < 9.2e18 else {
            return totalMicroseconds < 0 ? "-infinity" : "infinity"
        }
        let micros = Int64(totalMicroseconds)
        var seconds = time_t(micros.floorDivided(by: 1_000_000))
        let fraction = micros - Int64(seconds) * 1_000_000
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let date = "\(padded(Int64(parts.tm_year) + 1900, 4))-\(padded(Int64(parts.tm_mon) + 1, 2))-\(padded(Int64(parts.tm_mday), 2))"
        let time = "\(padded(Int64(parts.tm_hour), 2)):\(padded(Int64(parts.tm_min), 2)):\(padded(Int64(parts.tm_sec), 2))"
        return "\(date) \(time).\(padded(fraction, 6))+00"
    }
}

private func padded(_ value: Int64, _ width: Int) -> String {
    let digits = String(value)
    return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
}

extension Int64 {
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public static var postgresType: PostgresDataType { Wrapped.postgresType }
    public var postgresText: String? { self.flatMap { $0.postgresText } }
}

/// Arrays travel as array literals: every element double-quoted with `\` and `"` escaped,
/// SQL NULL as the bare word `NULL`.
extension Array: PostgresEncodable where Element: PostgresEncodable {
    public static var postgresType: PostgresDataType {
        Element.postgresType.arrayType ?? .unspecified
    }

    /// An array literal, `{"a","b\\"c",NULL}`, built as UTF-8 bytes.
    public var postgresText: String? {
        var literal: [UInt8] = [UInt8(ascii: "{")]
        for (index, element) in self.enumerated() {
            if index > 0 { literal.append(UInt8(ascii: ",")) }
            guard let text = element.postgresText else {
                literal.append(contentsOf: "NULL".utf8)
                continue
            }
            literal.append(UInt8(ascii: "\""))
            for byte in text.utf8 {
                if byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "\"") { literal.append(UInt8(ascii: "\\")) }
                literal.append(byte)
            }
            literal.append(UInt8(ascii: "\""))
        }
        literal.append(UInt8(ascii: "}"))
        return String(decoding: literal, as: UTF8.self)
    }
}

/// A `json`/`jsonb` document, kept as its text.
public struct PostgresJSON: Sendable, Hashable, PostgresEncodable {
    public var text: String

    public init(_ text: String) { self.text = text }

    public static var postgresType: PostgresDataType { .jsonb }
    public var postgresText: String? { self.text }
}
