import Foundation
@testable import ReceiptsServer
import Testing

/// The one encoder of every answer: members in declaration order, nil as null, dates in the
/// contract's form, containers nested and closed where they end.
@Suite("Ordered JSON encoder")
struct OrderedJSONEncoderTests {
    struct Inner: Encodable {
        let zeta: Int
        let alpha: [String]
    }

    struct Outer: Encodable {
        let id: String
        let createdAt: Date
        let missing: String?
        let count: Int64
        let ratio: Double
        let flags: [Bool]
        let inner: Inner
        let list: [Inner]
        let empty: [Inner]
        let maybe: Inner?
    }

    func json(_ value: some Encodable) throws -> String {
        var writer = JSONWriter(capacity: 0)
        try writer.encode(value)
        return writer.text
    }

    @Test("members come in declaration order, nested values close where they end, nil is null")
    func order() throws {
        let value = Outer(
            id: "m\"1", createdAt: Date(timeIntervalSince1970: 1_795_000_000.123), missing: nil, count: 42, ratio: 0.5,
            flags: [true, false], inner: Inner(zeta: 1, alpha: ["a", "b"]),
            list: [Inner(zeta: 2, alpha: []), Inner(zeta: 3, alpha: ["c"])], empty: [], maybe: nil)
        let text = try self.json(value)
        #expect(text == """
            {"id":"m\\"1","createdAt":"2026-11-18T11:06:40.123Z","missing":null,"count":42,"ratio":0.5,"flags":[true,false],\
            "inner":{"zeta":1,"alpha":["a","b"]},"list":[{"zeta":2,"alpha":[]},{"zeta":3,"alpha":["c"]}],"empty":[],"maybe":null}
            """)
    }

    @Test("what JSONDecoder reads back is what was encoded")
    func roundTrip() throws {
        struct Plain: Codable, Equatable {
            let name: String
            let numbers: [Int]
            let nested: [String: [Int]]
            let whole: Double
        }
        let value = Plain(name: "tab\there", numbers: [1, -2, 3], nested: ["k": [4]], whole: 2)
        let text = try self.json(value)
        #expect(text.contains(#""whole":2"#))
        #expect(try JSONDecoder().decode(Plain.self, from: Data(text.utf8)) == value)
    }

    @Test("a number JSON cannot hold is an error, not a broken answer")
    func notANumber() {
        struct Ratio: Encodable { let value: Double }
        #expect(throws: EncodingError.self) { try self.json(Ratio(value: .nan)) }
    }
}
