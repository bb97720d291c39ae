import struct Foundation.Date

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Fields of COPY's text format (`COPY … FROM STDIN`, no `FORMAT` option), appended to the
/// bytes a `PostgresCopyWriter` is given.
///
/// A row is its fields separated by `fieldSeparator` and ended by `rowEnd`. In a field, a
/// backslash, tab, newline or carriage return is escaped with a backslash, so that no value
/// can end a field or a row early, or be read as `\N`, which is NULL.
///
/// ```swift
/// var row: [UInt8] = []
/// PostgresCopyText.appendField(name, to: &row)
/// row.append(PostgresCopyText.fieldSeparator)
/// PostgresCopyText.appendTimestampField(sentAt, to: &row)
/// row.append(PostgresCopyText.rowEnd)
/// try await writer.write(row)
/// ```
public enum PostgresCopyText {
    /// What separates the fields of a row (a tab).
    public static let fieldSeparator = UInt8(ascii: "\t")
    /// What ends a row (a newline).
    public static let rowEnd = UInt8(ascii: "\n")

    /// Appends `value` as a field, escaped; nil as `\N` (NULL).
    public static func appendField(_ value: String?, to buffer: inout [UInt8]) {
        guard let value else {
            buffer.append(UInt8(ascii: "\\"))
            buffer.append(UInt8(ascii: "N"))
            return
        }
        let utf8 = value.utf8
        // Most values need no escape: copied whole.
        guard utf8.contains(where: Self.needsEscape) else {
            buffer.append(contentsOf: utf8)
            return
        }
        for byte in utf8 { Self.appendEscaped(byte, to: &buffer) }
    }

    /// Appends `elements` as a one-dimensional array field (`text[]`, `varchar[]`): an array
    /// literal, `{"a","b"}`, each element quoted (so that none reads as NULL, and commas and
    /// braces need no escape) with its `"` and `\` escaped, then escaped again as a field.
    public static func appendArrayField(_ elements: some Sequence<String>, to buffer: inout [UInt8]) {
        self.appendArrayField(elements.lazy.map(Optional.some), to: &buffer)
    }

    /// Appends `elements` as a one-dimensional array field whose nil elements are NULL
    /// (`{NULL,"2024-05-01T09:30:00Z"}`), the others as `appendArrayField(_:to:)` writes them.
    public static func appendArrayField(_ elements: some Sequence<String?>, to buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "{"))
        var isFirst = true
        for element in elements {
            if !isFirst { buffer.append(UInt8(ascii: ",")) }
            isFirst = false
            guard let element else {
                buffer.append(contentsOf: "NULL".utf8)
                continue
            }
            buffer.append(UInt8(ascii: "\""))
            for byte in element.utf8 {
                // The array literal's escape, a backslash, is itself escaped in the field.
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { Self.appendEscaped(UInt8(ascii: "\\"), to: &buffer) }
                Self.appendEscaped(byte, to: &buffer)
            }
            buffer.append(UInt8(ascii: "\""))
        }
        buffer.append(UInt8(ascii: "}"))
    }

    /// Appends `date` as a `timestamptz` field: ISO 8601 in UTC with microseconds
    /// (PostgreSQL's precision, rounded to the nearest), `2024-05-01T12:34:56.789012Z`,
    /// which no `DateStyle` or `TimeZone` of the session reads otherwise. Years before 1 are
    /// written with `BC`, as the server writes them.
    public static func appendTimestampField(_ date: Date, to buffer: inout [UInt8]) {
        let totalMicroseconds = (date.timeIntervalSince1970 * 1_000_000).rounded()
        guard totalMicroseconds.isFinite, abs(totalMicroseconds) < 9.2e18 else {
            buffer.append(contentsOf: (totalMicroseconds < 0 ? "-infinity" : "infinity").utf8)
            return
        }
        let microseconds = Int64(totalMicroseconds)
        let (quotient, remainder) = microseconds.quotientAndRemainder(dividingBy: 1_000_000)
        // Rounded down, for times before 1970 too: the fraction is never negative.
        var seconds = time_t(remainder < 0 ? quotient - 1 : quotient)
        let fraction = remainder < 0 ? remainder + 1_000_000 : remainder
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var year = Int64(parts.tm_year) + 1900
        let isBeforeChrist = year <= 0
        if isBeforeChrist { year = 1 - year }  // there is no year 0: 1 BC comes before AD 1
        Self.appendDigits(year, count: 4, to: &buffer)
        buffer.append(UInt8(ascii: "-"))
        Self.appendDigits(Int64(parts.tm_mon) + 1, count: 2, to: &buffer)
        buffer.append(UInt8(ascii: "-"))
        Self.appendDigits(Int64(parts.tm_mday), count: 2, to: &buffer)
        buffer.append(UInt8(ascii: "T"))
        Self.appendDigits(Int64(parts.tm_hour), count: 2, to: &buffer)
        buffer.append(UInt8(ascii: ":"))
        Self.appendDigits(Int64(parts.tm_min), count: 2, to: &buffer)
        buffer.append(UInt8(ascii: ":"))
        Self.appendDigits(Int64(parts.tm_sec), count: 2, to: &buffer)
        buffer.append(UInt8(ascii: "."))
        Self.appendDigits(fraction, count: 6, to: &buffer)
        buffer.append(UInt8(ascii: "Z"))
        if isBeforeChrist { buffer.append(contentsOf: " BC".utf8) }
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
    }

    private static func appendEscaped(_ byte: UInt8, to buffer: inout [UInt8]) {
        let escaped: UInt8
        switch byte {
        case UInt8(ascii: "\\"): escaped = UInt8(ascii: "\\")
        case UInt8(ascii: "\t"): escaped = UInt8(ascii: "t")
        case UInt8(ascii: "\n"): escaped = UInt8(ascii: "n")
        case UInt8(ascii: "\r"): escaped = UInt8(ascii: "r")
        default:
            buffer.append(byte)
            return
        }
        buffer.append(UInt8(ascii: "\\"))
        buffer.append(escaped)
    }

    /// Appends a non-negative `value` in decimal, padded with zeros to `count` digits at
    /// least; written in place, with no array of its own (a timestamp has eight numbers).
    private static func appendDigits(_ value: Int64, count: Int, to buffer: inout [UInt8]) {
        var width = 1
        var power: Int64 = 10
        while power <= value, width < 19 {
            width += 1
            power = power.multipliedReportingOverflow(by: 10).partialValue
        }
        buffer.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: max(width, count)))
        var rest = value
        var index = buffer.count - 1
        while rest > 0 {
            buffer[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
            index -= 1
        }
    }
}
