import Foundation
@testable import ReceiptsServer
import ReceiptsCore
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

    @Test("a message without receipt is written by hand exactly as JSONEncoder writes it")
    func plainMessage() throws {
        let at = Date(timeIntervalSince1970: 1_795_000_000.123)
        let record = MessageRecord(
            id: "m:1", chatId: "chat@x", senderId: "alice", text: #"hi "there"\ / ünï 👋\#n"#, createdAt: at,
            receipts: MessageReceipts(
                seq: 42, senderId: "alice", deliveries: [UserReceipt(userId: "bob", at: at), UserReceipt(userId: "carol", at: at)],
                visibleReads: [UserReceipt(userId: "bob", at: at)], hiddenReaders: ["dave"]))
        for response in [MessageResponse(record), MessageResponse(MessageRecord(
            id: "m2", chatId: "c", senderId: "a", text: "", createdAt: at,
            receipts: MessageReceipts(seq: 1, senderId: "a", deliveries: [], visibleReads: [], hiddenReaders: [])))] {
            let byHand = try JSONSerialization.jsonObject(with: Data(response.plainJSON.utf8)) as? NSDictionary
            let encoded = try JSONSerialization.jsonObject(with: JSONCoding.makeEncoder().encode(response)) as? NSDictionary
            #expect(byHand != nil)
            #expect(byHand == encoded)
        }
    }
}
