import Foundation
import ReceiptsCore
import Testing

@Suite("Receipt JSON")
struct ReceiptJSONTests {
    private func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    @Test("a summary writes readAt and label as null rather than leaving them out")
    func summaryNulls() throws {
        let summary = ReceiptSummary(state: .sent, recipients: 0, delivered: 0, read: 0, readAt: nil, label: nil)
        #expect(try json(summary) == #"{"delivered":0,"label":null,"read":0,"readAt":null,"recipients":0,"state":"sent"}"#)
    }

    @Test("a summary's time follows the encoder's date strategy")
    func summaryDate() throws {
        let summary = ReceiptSummary(
            state: .read, recipients: 1, delivered: 1, read: 1,
            readAt: Instants.utc("2024-07-15T17:42:00Z"), label: "Read"
        )
        #expect(try json(summary) == #"{"delivered":1,"label":"Read","read":1,"readAt":"2024-07-15T17:42:00Z","recipients":1,"state":"read"}"#)
    }

    @Test("a recipient status writes missing times as null")
    func statusNulls() throws {
        let status = RecipientStatus(userId: "bob", deliveredAt: nil, readAt: nil)
        #expect(try json(status) == #"{"deliveredAt":null,"readAt":null,"userId":"bob"}"#)
    }

    @Test("summaries and statuses decode what they encode")
    func roundTrip() throws {
        let encoder = JSONEncoder()
        let decoder = JSONDecoder()
        let summary = ReceiptSummary(
            state: .delivered, recipients: 2, delivered: 2, read: 1, readAt: nil, label: "Read by 1/2"
        )
        let status = RecipientStatus(userId: "bob", deliveredAt: Instants.noon, readAt: nil)
        #expect(try decoder.decode(ReceiptSummary.self, from: encoder.encode(summary)) == summary)
        #expect(try decoder.decode(RecipientStatus.self, from: encoder.encode(status)) == status)
    }
}
