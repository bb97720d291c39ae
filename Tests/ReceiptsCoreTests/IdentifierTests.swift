import ReceiptsCore
import Testing

@Suite("Identifiers")
struct IdentifierTests {
    @Test("ids of letters, digits and ._:@- are accepted", arguments: [
        "a", "alice", "User42", "user.name_1:team@example-2", "._:@-",
    ])
    func accepted(_ id: String) {
        #expect(Identifier.isValid(id))
    }

    @Test("empty ids and other characters are rejected", arguments: [
        "", "with space", "a/b", "a\\b", "tab\t", "café", "ü", "日本", "👍", "a+b", "a#b", "a?b", "a%20b",
    ])
    func rejected(_ id: String) {
        #expect(!Identifier.isValid(id))
    }

    @Test("ids are at most 128 characters")
    func length() {
        #expect(Identifier.isValid(String(repeating: "a", count: 128)))
        #expect(!Identifier.isValid(String(repeating: "a", count: 129)))
    }

    @Test("substrings are checked like strings")
    func substrings() {
        let path = "chats/room-1"
        #expect(Identifier.isValid(path.split(separator: "/")[1]))
    }
}
