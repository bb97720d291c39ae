import Postgres
import ReceiptsCore
import TestSupport
import Testing

@Suite("The identifier domain")
struct IdentifierDomainTests {
    /// 0001's check, which 0015 replaced with a cheaper one for the same rule.
    static let firstCheck = "^[A-Za-z0-9._:@-]{1,128}$"

    static let edgeCases: [String] = [
        "", "a", "Z", "0", "9", ".", "_", ":", "@", "-", "user@example.com", "chat:42", "a.b-c_d",
        String(repeating: "a", count: 127), String(repeating: "a", count: 128), String(repeating: "a", count: 129),
        String(repeating: "é", count: 64), String(repeating: "é", count: 1), "aé", "a b", " a", "a ", "a\n", "\na", "a\tb",
        "a/b", "a+b", "a,b", "[", "`", "{", "~", "^", "\\", "$", "'", "\"", "%", "A-", "日本", "a\u{7F}",
    ]

    @Test("accepts and refuses what 0001's regular expression and the service's check do")
    func sameRuleAsBefore() async throws {
        try await TestDatabase.ensureMigrated()
        let alphabet = Array("aZ09._:@-/ é\n~[`{")
        let random = (0..<200).map { _ in
            String((0..<Int.random(in: 0...130)).map { _ in alphabet.randomElement()! })
        }
        try await TestDatabase.pool.withConnection { connection in
            for text in Self.edgeCases + random {
                let matchedFirstCheck: Bool = try await connection.query(
                    "SELECT $1 COLLATE \"C\" ~ $2", [text, Self.firstCheck]
                )[0].decode(column: 0)
                let storable: Bool
                do {
                    _ = try await connection.query("SELECT $1::receipts.identifier", [text])
                    storable = true
                } catch let error as PostgresError where error.sqlState == "23514" {
                    storable = false
                }
                #expect(storable == matchedFirstCheck, "\(text.debugDescription)")
                #expect(Identifier.isValid(text) == matchedFirstCheck, "\(text.debugDescription)")
            }
        }
    }
}
