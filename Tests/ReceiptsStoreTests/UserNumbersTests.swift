@testable import ReceiptsStore
import Testing

/// The store looks a page's user ids up by the bytes the database sent (`UserNumbers`).
@Suite("User numbers by bytes")
struct UserNumbersTests {
    @Test("a lookup by bytes finds each user's number and no one else's")
    func numbersByBytes() {
        let users = (0..<1_000).map { "member-\($0)" } + ["", "a", "0123456789abcdef", "0123456789abcdeg"]
        let numbers = UserNumbers(users)
        for (number, user) in users.enumerated() {
            #expect(numbers.number(of: user) == number)
        }
        for stranger in ["member-1000", "member-", "Member-1", "0123456789abcdef0", "b"] {
            #expect(numbers.number(of: stranger) == nil)
        }
        #expect(UserNumbers([]).number(of: "anyone") == nil)
    }
}
