import Foundation
import Postgres
import ReceiptsCore
@testable import ReceiptsJSON
@testable import ReceiptsServer
@testable import ReceiptsStore
import Testing

@Suite("Hand-written JSON")
struct JSONStringTests {
    @Test("strings with quotes, backslashes, control characters and unicode parse back unchanged")
    func roundTrip() throws {
        for text in ["plain", "", #"say "hi""#, #"back\slash"#, "line\nbreak\ttab\r", "\u{1}\u{1f}", "ünïcødé 👋"] {
            let parsed = try JSONSerialization.jsonObject(with: Data(JSONString.quoted(text).utf8), options: .fragmentsAllowed)
            #expect(parsed as? String == text)
        }
    }

    @Test("lists of strings parse back unchanged, whether or not one needs an escape")
    func lists() throws {
        for texts in [[], ["a"], (0..<1000).map { "user-\($0)" }, ["ünïcødé 👋", "plain"], ["plain", #"say "hi""#, "x"], ["line\nbreak", "\u{1f}"]] {
            #expect(try Self.parsedList { $0.strings(texts) } == texts)
        }
    }

    /// A page writes its `readBy` and `deliveredTo` from the bytes PostgreSQL sent
    /// (`UserIdList`): ids copied whole when every one is an id, escaped otherwise.
    @Test("id lists as the database sent them parse back unchanged, in order, whether or not one needs an escape")
    func storedLists() throws {
        let cases: [[[String]]] = [
            [], [[]], [["a"]], [["a", "b-1"], [], ["c@x.org", "d:1", "e_f.g"]],
            [(0..<1000).map { "member-\($0)" }, (1000..<1032).map { "member-\($0)" }],
            [["plain"], [#"say "hi""#, #"back\slash"#, "line\nbreak", "\u{1f}", "ünïcødé"]],
        ]
        for arrays in cases {
            let ids = Array(arrays.joined())
            let list = UserIdList(
                stored: try arrays.map { try PostgresTextElements.decode(from: Self.binaryTextArray($0), type: .textArray) },
                areIdentifiers: ids.allSatisfy { Identifier.isValid($0) })
            #expect(try Self.parsedList { $0.strings(list) } == ids)
        }
    }

    /// The list `write` writes as the member `list` of an object, parsed back by Foundation.
    static func parsedList(_ write: (inout JSONWriter) -> Void) throws -> [String]? {
        var json = JSONWriter(capacity: 0)
        json.raw("{")
        json.raw(#""list":"#)
        write(&json)
        json.raw("}")
        return (try JSONSerialization.jsonObject(with: Data(json.bytes)) as? [String: Any])?["list"] as? [String]
    }

    /// A one-dimensional `text[]` in PostgreSQL's binary form.
    static func binaryTextArray(_ texts: [String]) -> ArraySlice<UInt8> {
        func integer(_ value: Int32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }
        guard !texts.isEmpty else { return ArraySlice(integer(0) + integer(0) + integer(25)) }
        var bytes = integer(1) + integer(0) + integer(25) + integer(Int32(texts.count)) + integer(1)
        for text in texts { bytes += integer(Int32(text.utf8.count)) + Array(text.utf8) }
        return ArraySlice(bytes)
    }

    @Test("the unread list is valid JSON with the contract's fields")
    func unreadList() throws {
        let response = UnreadListResponse([
            .init(chatId: "a", unreadCount: 120, markedUnread: false), .init(chatId: "b", unreadCount: 1, markedUnread: true),
        ])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.json.utf8)) as? [String: Any])
        #expect(object["total"] as? Int == 121)
        #expect(object["badge"] as? String == "99+")
        let chats = try #require(object["chats"] as? [[String: Any]])
        #expect(chats.map { $0["chatId"] as? String } == ["a", "b"])
        #expect(chats.map { $0["badge"] as? String } == ["99+", "1"])
        #expect(chats.map { $0["markedUnread"] as? Bool } == [false, true])
        #expect(chats.map { $0["unreadCount"] as? Int } == [120, 1])
    }

    @Test("messages are written by hand exactly as JSONEncoder writes them, with and without receipt and recipients")
    func messages() throws {
        let at = Date(timeIntervalSince1970: 1_795_000_000.123)
        let later = Date(timeIntervalSince1970: 1_795_000_061.987654)
        let record = MessageRecord(
            id: "m:1", chatId: "chat@x", seq: 42, senderId: "alice", text: #"hi "there"\ / ünï 👋\#n"#, createdAt: at,
            deliveredTo: UserIdList(["bob", "carol"]), readBy: UserIdList(["bob"]))
        let empty = MessageRecord(id: "m2", chatId: "c", seq: 1, senderId: "a", text: "", createdAt: at)
        let responses = [
            MessageResponse(record),
            MessageResponse(empty),
            MessageResponse(record, receipt: ReceiptSummary(state: .delivered, recipients: 3, delivered: 2, read: 1, readAt: nil, label: nil)),
            MessageResponse(record, receipt: ReceiptSummary(state: .read, recipients: 1, delivered: 1, read: 1, readAt: later, label: #"Read by "all""#),
                            recipients: [RecipientStatus(userId: "bob", deliveredAt: at, readAt: later),
                                         RecipientStatus(userId: "carol", deliveredAt: later, readAt: nil),
                                         RecipientStatus(userId: "erin", deliveredAt: nil, readAt: nil)]),
            MessageResponse(empty, receipt: ReceiptSummary(state: .sent, recipients: 0, delivered: 0, read: 0, readAt: nil, label: "Delivered"),
                            recipients: []),
        ]
        for response in responses {
            let byHand = try JSONSerialization.jsonObject(with: Data(response.json.utf8)) as? NSDictionary
            let encoded = try JSONSerialization.jsonObject(with: JSONCoding.makeEncoder().encode(response)) as? NSDictionary
            #expect(byHand != nil)
            #expect(byHand == encoded)
        }
        let list = MessageListResponse(messages: responses)
        let byHand = try JSONSerialization.jsonObject(with: Data(list.json.utf8)) as? NSDictionary
        let encoded = try JSONSerialization.jsonObject(with: JSONCoding.makeEncoder().encode(list)) as? NSDictionary
        #expect(byHand != nil)
        #expect(byHand == encoded)
        let none = try JSONSerialization.jsonObject(with: Data(MessageListResponse(messages: []).json.utf8)) as? NSDictionary
        #expect(none == ["messages": []])
    }
}
