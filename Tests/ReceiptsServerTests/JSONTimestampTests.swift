import Foundation
import Postgres
@testable import ReceiptsJSON
@testable import ReceiptsLive
@testable import ReceiptsServer
@testable import ReceiptsStore
import Testing

@Suite("Timestamps and event data in hand-written JSON")
struct JSONTimestampTests {
    /// A `Date` as the service gets one from PostgreSQL: microseconds since 2000-01-01.
    private func date(postgresMicroseconds microseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(microseconds) / 1_000_000 + 946_684_800)
    }

    @Test("times are RFC 3339 UTC with milliseconds, cut (not rounded) from the microseconds stored")
    func knownTimes() {
        #expect(JSONCoding.timestamp(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(JSONCoding.timestamp(self.date(postgresMicroseconds: 0)) == "2000-01-01T00:00:00.000Z")
        // 2000-02-29 (a leap day of a century year divisible by 400) and 2100-03-01.
        #expect(JSONCoding.timestamp(self.date(postgresMicroseconds: 59 * 86_400_000_000 + 1)) == "2000-02-29T00:00:00.000Z")
        #expect(JSONCoding.timestamp(Date(timeIntervalSince1970: 4_107_542_400)) == "2100-03-01T00:00:00.000Z")
        #expect(JSONCoding.timestamp(Date(timeIntervalSince1970: 1_795_326_127.123999)) == "2026-11-22T05:42:07.123Z")
        // An exact millisecond stays itself, though the Double holding it is a little below.
        #expect(JSONCoding.timestamp(self.date(postgresMicroseconds: -903_229_361_995_000)) == "1971-05-18T22:57:18.005Z")
        #expect(JSONCoding.timestamp(Date(timeIntervalSince1970: 253_402_300_799.999)) == "9999-12-31T23:59:59.999Z")
        // Outside the years the service writes, Foundation's formatter does it.
        #expect(JSONCoding.timestamp(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59.000Z")
    }

    @Test("times read from PostgreSQL agree with Foundation's calendar, to the millisecond, over 100,000 of 1970-2037")
    func agreesWithFoundation() {
        let seconds = Date.ISO8601FormatStyle(includingFractionalSeconds: false, timeZone: .gmt)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<100_000 {
            var microseconds = Int64.random(in: -946_684_800_000_000...1_199_145_600_000_000, using: &generator)
            // Exact milliseconds and the microsecond before them are where cutting a Double goes wrong.
            if Bool.random(using: &generator) { microseconds = microseconds / 1000 * 1000 - Int64.random(in: 0...1, using: &generator) }
            let sinceEpoch = microseconds + 946_684_800_000_000
            // The date and the time of day from Foundation for the whole second (exact in a
            // Double), the milliseconds from the integer.
            let whole = Date(timeIntervalSince1970: Double(sinceEpoch / 1_000_000)).formatted(seconds)
            let millisecond = String(1000 + sinceEpoch % 1_000_000 / 1000).dropFirst()
            let expected = whole.dropLast() + "." + millisecond + "Z"
            let written = JSONCoding.timestamp(self.date(postgresMicroseconds: microseconds))
            guard written == expected else {
                Issue.record("\(microseconds): \(written) instead of \(expected)")
                return
            }
        }
    }

    @Test("an event's own data joins its common members, as one JSON object")
    func eventData() throws {
        func json(_ data: String) -> String {
            LiveEvent(StoredEvent(
                id: 7, transactionId: 1, tenantId: "t", type: "unread.changed", chatId: "c", userId: "u", messageIds: [],
                data: data, audience: ["u"], occurredAt: Date(timeIntervalSince1970: 0)),
                history: EventHistory(segments: [.init(id: "aaaaaaaaaaaa", startedAfter: 0, resumableThrough: 0)])).json
        }
        let common = #"{"id":"7","type":"unread.changed","chatId":"c","userId":"u","messageIds":[],"at":"1970-01-01T00:00:00.000Z""#
        #expect(json(#"{"unreadCount": 3, "markedUnread": false}"#) == common + #","unreadCount": 3, "markedUnread": false}"#)
        #expect(json("{}") == common + "}")
        #expect(json(" { } ") == common + "}")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json(#"{"unreadCount": 3}"#).utf8)) as? [String: Any])
        #expect(object["unreadCount"] as? Int == 3)
    }
}
