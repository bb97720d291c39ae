// The example of README.md and docs/client.md, run against a local service:
//   RECEIPTS_URL (default http://127.0.0.1:8080) and either RECEIPTS_API_KEY (a tenant's
//   key) or RECEIPTS_ADMIN_TOKEN (then a tenant is created for the run).
// Exits 0 when every step gave what the example says, 1 otherwise.
import Foundation
import ReceiptsClient

let environment = ProcessInfo.processInfo.environment
let baseURL = URL(string: environment["RECEIPTS_URL"] ?? "http://127.0.0.1:8080")!

func apiKey() async throws -> String {
    if let key = environment["RECEIPTS_API_KEY"] { return key }
    guard let adminToken = environment["RECEIPTS_ADMIN_TOKEN"] else {
        throw ExampleFailure("set RECEIPTS_API_KEY, or RECEIPTS_ADMIN_TOKEN to create a tenant")
    }
    let admin = ReceiptsClient(baseURL: baseURL, credential: adminToken)
    return try await admin.createTenant(named: "example").apiKey
}

struct ExampleFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func check(_ condition: Bool, _ what: String) throws {
    guard condition else { throw ExampleFailure("unexpected: \(what)") }
    print("ok: \(what)")
}

do {
    // --- The README example ---
    let receipts = ReceiptsClient(baseURL: baseURL, credential: try await apiKey())

    // Create a chat (safe to repeat) and follow its events.
    try await receipts.createChat("team", members: ["alice", "bob", "carol"])
    let events = try await receipts.events()

    // Alice sends; Bob's device got it and Bob reads it.
    let message = try await receipts.send("Lunch at noon?", in: "team", from: "alice")
    try await receipts.markDelivered(chatID: "team", messageIDs: [message.id], to: "bob")
    try await receipts.markMessagesAsRead(chatID: "team", messageIDs: [message.id], by: "bob")

    // What Alice sees under her message, and Carol's badge.
    let seen = try await receipts.receipt(of: message.id, in: "team", viewer: "alice")
    print(seen.receipt?.label ?? "")  // "Read by 1/2"
    let carol = try await receipts.unreadCounts(for: "carol")
    print(carol.badge)  // "1"

    // The same, as events.
    var followed: [ReceiptsEvent] = []
    for try await event in events {
        followed.append(event)
        switch event.kind {
        case .messageCreated: print("\(event.userID ?? "") sent \(event.messageIDs)")
        case .receiptDelivered: print("delivered to \(event.userID ?? ""): \(event.messageIDs)")
        case .receiptRead: print("\(event.userID ?? "") read \(event.messageIDs)")
        case .unreadChanged(let count, _): print("\(event.userID ?? "")'s unread count: \(count)")
        case .messageDeleted, .chatDeleted, .userErased: print("\(event.kind): drop it from what you show")
        case .messageEdited: print("\(event.messageIDs) edited: fetch it again to show the new text")
        case .chatImported: print("\(event.chatID ?? "") has imported history: reload it")
        case .resyncRequired: print("missed events: reload")
        case .other: break
        }
        if event.kind == .receiptRead { break }
    }
    // --- end of the example ---

    try check(seen.receipt?.label == "Read by 1/2", "the receipt's label is \"Read by 1/2\"")
    try check(carol.total == 1 && carol.badge == "1", "Carol has 1 unread message")
    try check(
        followed.map(\.kind).filter { if case .unreadChanged = $0 { false } else { true } }
            == [.messageCreated, .receiptDelivered, .receiptRead],
        "the events are message.created, receipt.delivered, receipt.read")
    print("the example ran as documented")
} catch {
    print("example failed: \(error)")
    exit(1)
}
