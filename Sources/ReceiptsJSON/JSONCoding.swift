import Foundation

/// JSON as the contract writes it: camelCase keys, timestamps as RFC 3339 UTC strings with
/// milliseconds (`2026-11-22T05:42:07.123Z`).
package enum JSONCoding {
    package static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(timestamp(date))
        }
        return encoder
    }

    package static func makeDecoder() -> JSONDecoder {
        JSONDecoder()
    }

    package static func timestamp(_ date: Date) -> String {
        var bytes: [UInt8] = []
        self.appendTimestamp(date, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `date` in the contract's form, without quotes.
    ///
    /// Written digit by digit: every event and most answers carry times, and Foundation's
    /// formatter took a tenth of the time the event hub spends on an event. The time is
    /// first rounded to the microsecond (what PostgreSQL stores; a `Date` made from its
    /// microseconds is a `Double` a little above or below them), then cut to the millisecond,
    /// so `…07.123999Z` is `.123` and an exact `.005` stays `.005`. Outside the years
    /// 1970-9999, which the service never writes, Foundation's formatter does it.
    package static func appendTimestamp(_ date: Date, to bytes: inout [UInt8]) {
        let microseconds = (date.timeIntervalSince1970 * 1_000_000).rounded()
        guard microseconds >= 0, microseconds < 253_402_300_800_000_000 else {
            bytes.append(contentsOf: date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)).utf8)
            return
        }
        let milliseconds = Int64(microseconds) / 1000
        let days = milliseconds / 86_400_000
        let millisecondOfDay = milliseconds % 86_400_000
        let (year, month, day) = self.civilDate(daysSince1970: days)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        digits(year, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(month, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(day, 2)
        bytes.append(UInt8(ascii: "T"))
        digits(millisecondOfDay / 3_600_000, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(millisecondOfDay / 60_000 % 60, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(millisecondOfDay / 1000 % 60, 2)
        bytes.append(UInt8(ascii: "."))
        digits(millisecondOfDay % 1000, 3)
        bytes.append(UInt8(ascii: "Z"))
    }

    /// The proleptic Gregorian date `days` after 1970-01-01 (0 or more), by Howard Hinnant's
    /// `civil_from_days`: 400-year eras of 146,097 days, years counted from March.
    private static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468  // days since 0000-03-01
        let era = shifted / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
