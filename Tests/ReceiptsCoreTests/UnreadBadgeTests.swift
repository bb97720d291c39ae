import ReceiptsCore
import Testing

@Suite("Unread badge")
struct UnreadBadgeTests {
    @Test("the badge is the count, empty for none, capped at \"99+\"",
          arguments: [(0, ""), (1, "1"), (5, "5"), (99, "99"), (100, "99+"), (12_345, "99+")])
    func badge(count: Int, expected: String) {
        #expect(UnreadBadge.text(for: count) == expected)
    }
}
