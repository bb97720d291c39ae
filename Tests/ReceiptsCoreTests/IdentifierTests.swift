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

    /// The bytes version (stored lists, checked without `String`s) has its own table of
    /// allowed bytes; it must agree with the characters of the contract for every byte.
    @Test("ids given as bytes are checked like strings, byte for byte")
    func bytes() {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-".utf8)
        for byte in UInt8.min...UInt8.max {
            for id in [[byte], [UInt8(ascii: "a"), byte], [byte, UInt8(ascii: "9"), UInt8(ascii: "-")]] {
                #expect(id.withUnsafeBytes { Identifier.isValid(utf8: $0) } == id.allSatisfy(allowed.contains), "byte \(byte)")
            }
        }
        #expect(![UInt8]().withUnsafeBytes { Identifier.isValid(utf8: $0) })
        #expect(Array(repeating: UInt8(ascii: "a"), count: 128).withUnsafeBytes { Identifier.isValid(utf8: $0) })
        #expect(!Array(repeating: UInt8(ascii: "a"), count: 129).withUnsafeBytes { Identifier.isValid(utf8: $0) })
        #expect("ü".utf8.withContiguousStorageIfAvailable { Identifier.isValid(utf8: UnsafeRawBufferPointer($0)) } == false)
    }
}
