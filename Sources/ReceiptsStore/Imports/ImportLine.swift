import ReceiptsCore

/// One line of an import's body (`POST /v1/imports`, `receiptsd import`), parsed and checked
/// against the API's rules for its kind (`ImportLineParser`). What the rules of the database
/// decide (members, order, threads) is checked when it is loaded (sql/functions/imports.sql).
public enum ImportLine: Sendable, Equatable {
    case chat(Chat)
    case message(Message)
    /// A `read` or `delivered` line: a member's position, everything up to a message.
    case position(Position)

    /// `{"type":"chat","id","kind","members":[{"userId","joinedAt"?}],"createdAt"?}`.
    public struct Chat: Sendable, Equatable {
        public var id: String
        public var kind: ChatKind
        public var members: [Member]
        public var createdAt: ImportTime?
    }

    /// A member of a chat line; `joinedAt` nil: a member from the start.
    public struct Member: Sendable, Equatable {
        public var userId: String
        public var joinedAt: ImportTime?
    }

    /// `{"type":"message","id","chatId","senderId","text","createdAt","threadId"?,"mentions"?,
    /// "mentionsAll"?,"readBy"?,"deliveredTo"?}`.
    public struct Message: Sendable, Equatable {
        public var id: String
        public var chatId: String
        public var senderId: String
        public var text: String
        public var createdAt: ImportTime
        public var threadId: String?
        public var mentions: [String]
        public var mentionsAll: Bool
        public var readBy: [Receipt]
        public var deliveredTo: [Receipt]
    }

    /// A reader or deliverer a message line lists; `at` nil: when the message was sent.
    public struct Receipt: Sendable, Equatable {
        public var userId: String
        public var at: ImportTime?
    }

    /// `{"type":"read"|"delivered","chatId","userId","upTo","at"?}`; `at` nil: when `upTo` was sent.
    public struct Position: Sendable, Equatable {
        public var chatId: String
        public var userId: String
        public var upTo: String
        public var at: ImportTime?
        public var isRead: Bool
    }
}

/// A time of an import line: RFC 3339 with a zone (`2024-05-01T09:30:00Z`,
/// `2024-05-01T11:30:00.250+02:00`), checked field by field and kept as written, which is
/// how PostgreSQL reads it (`timestamptz`): a value it would refuse never reaches the COPY,
/// where one bad value would fail the whole body.
public struct ImportTime: Sendable, Equatable {
    public let text: String

    public init?(_ text: String) {
        guard Self.isValid(Array(text.utf8)) else { return nil }
        self.text = text
    }

    /// `YYYY-MM-DDTHH:MM:SS`, up to 9 fractional digits, then `Z` or `±HH:MM`; a real date,
    /// years 1 to 9999.
    static func isValid(_ bytes: [UInt8]) -> Bool {
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for index in range {
                let byte = bytes[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        func byte(_ index: Int, is expected: Character) -> Bool {
            index < bytes.count && bytes[index] == expected.asciiValue
        }
        guard bytes.count >= 20, bytes.count <= 40,
            let year = number(0..<4), byte(4, is: "-"), let month = number(5..<7), byte(7, is: "-"),
            let day = number(8..<10), byte(10, is: "T") || byte(10, is: "t"),
            let hour = number(11..<13), byte(13, is: ":"), let minute = number(14..<16), byte(16, is: ":"),
            let second = number(17..<19)
        else { return false }
        guard year >= 1, (1...12).contains(month), day >= 1, day <= Self.days(in: month, of: year),
            hour < 24, minute < 60, second < 60
        else { return false }
        var index = 19
        if byte(index, is: ".") {
            let digits = bytes[(index + 1)...].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }.count
            guard (1...9).contains(digits) else { return false }
            index += 1 + digits
        }
        if byte(index, is: "Z") || byte(index, is: "z") { return index + 1 == bytes.count }
        guard byte(index, is: "+") || byte(index, is: "-"), index + 6 == bytes.count,
            let zoneHours = number((index + 1)..<(index + 3)), byte(index + 3, is: ":"),
            let zoneMinutes = number((index + 4)..<(index + 6))
        else { return false }
        return zoneHours < 24 && zoneMinutes < 60
    }

    private static func days(in month: Int, of year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
