import Foundation
import HTTPTypes
@testable import ReceiptsJSON
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

    @Test("every standard kind of number is written as JSONEncoder writes it, alone, in lists and optional")
    func standardKinds() throws {
        struct Numbers: Encodable {
            let small: Int8
            let medium: Int32
            let unsigned: UInt16
            let single: Float
            let doubles: [Double]
            let absent: Int16?
            let present: UInt64?
        }
        let value = Numbers(small: -3, medium: 70_000, unsigned: 9, single: 1.5, doubles: [0.25, 3], absent: nil, present: 7)
        #expect(try self.json(value) == #"{"small":-3,"medium":70000,"unsigned":9,"single":1.5,"doubles":[0.25,3],"absent":null,"present":7}"#)
    }

    @Test("a number JSON cannot hold is an error, not a broken answer")
    func notANumber() {
        struct Ratio: Encodable { let value: Double }
        #expect(throws: EncodingError.self) { try self.json(Ratio(value: .nan)) }
    }

    @Test("a delivery a WebSocket could not record is answered with the documented delivered.failed frame")
    func deliveryFailure() throws {
        let failure = WebSocketStream.DeliveryFailure(
            chatId: "c", messageIds: ["m1", "m2"], error: APIError(.serviceUnavailable, .unavailable, #"say "again""#))
        #expect(
            try failure.json
                == #"{"type":"delivered.failed","chatId":"c","messageIds":["m1","m2"],"error":{"code":"unavailable","message":"say \"again\""}}"#)
    }
}
