import Foundation
import Postgres
import ReceiptsCore
import ReceiptsStore
import TestSupport
import Testing

/// A page of messages (`ReceiptsStore.messages`) reads its receipt chunks row by row, keeps
/// their lists as the bytes PostgreSQL sent and tallies the viewer's messages as each chunk
/// arrives; a message alone (`ReceiptsStore.message`) reads them as `String`s and counts them
/// with `ReceiptRules.summary(of:)`. Both must tell the same.
@Suite("Pages of a large group")
struct PageReceiptsTests {
    @Test("a page of a 100-member group lists and counts each message as the message alone does, through reads, deliveries, hidden reads, leaves and rejoins")
    func pageAgreesWithMessages() async throws {
        // Some 600 statements, about correctness, not time: a CI run with the whole suite beside
        // it once took one of them past the default 5 s (57014), so the timeout is generous.
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "page", databaseTimeout: .seconds(60))
        var generator = UnreadCountTests.Generator(state: 28)
        let members = (0..<100).map { "member-\($0)" }  // four receipt chunks
        let senders = ["member-0", "member-1"]
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: members) == .created)
        for member in members where Int(member.dropFirst(7))! % 17 == 5 {
            try await store.setReadReceipts(tenant: tenant, user: member, enabled: false)
        }
        var sent: [String] = []
        var left: Set<String> = []
        for step in 0..<14 {
            let id = "m\(step)"
            _ = try await store.sendMessage(tenant: tenant, chat: "g", id: id, sender: senders[step % 2], text: id)
            sent.append(id)
            for member in members.shuffled(using: &generator).prefix(40) where !left.contains(member) {
                let target: MarkTarget =
                    switch Int.random(in: 0..<4, using: &generator) {
                    case 0: .all
                    case 1: .upTo(sent.randomElement(using: &generator)!)
                    default: .messages(Array(sent.shuffled(using: &generator).prefix(3)))
                    }
                if Bool.random(using: &generator) {
                    _ = try await store.markRead(tenant: tenant, chat: "g", user: member, target: target)
                } else {
                    _ = try await store.markDelivered(tenant: tenant, chat: "g", user: member, target: target)
                }
            }
            // Some leave (their reads keep counting), some of them come back.
            for member in members.dropFirst(2).shuffled(using: &generator).prefix(3) {
                if left.remove(member) != nil {
                    _ = try await store.join(tenant: tenant, chat: "g", user: member)
                } else {
                    _ = try await store.leave(tenant: tenant, chat: "g", user: member)
                    left.insert(member)
                }
            }
        }
        _ = try await store.join(tenant: tenant, chat: "g", user: "late-joiner")

        for viewer in senders {
            let page = try await store.messages(tenant: tenant, chat: "g", before: nil, limit: 50, viewer: viewer).get()
            #expect(page.messages.map(\.id) == sent)
            for listed in page.messages {
                let found = try #require(try await store.message(tenant: tenant, chat: "g", id: listed.id, viewer: viewer))
                let isMostRecent = found.isViewersMostRecent
                #expect(listed.readBy.strings == found.receipts.visibleReads.map(\.userId), "\(listed.id)")
                #expect(listed.deliveredTo.strings == found.receipts.deliveredTo, "\(listed.id)")
                #expect(listed.readBy.strings == found.message.readBy.strings && listed.deliveredTo.strings == found.message.deliveredTo.strings)
                #expect(listed.readBy.count == found.receipts.visibleReads.count && listed.deliveredTo.count == found.receipts.deliveredTo.count)
                #expect(listed.readBy.areStoredIdentifiers && listed.deliveredTo.areStoredIdentifiers)
                guard listed.senderId == viewer else {
                    #expect(page.tally(of: listed) == nil, "\(listed.id): only the viewer's own messages are tallied")
                    continue
                }
                let tally = try #require(page.tally(of: listed))
                #expect((listed.id == page.viewersMostRecentMessageId) == isMostRecent)
                for style in [LabelStyle.counts, .ticks, .imessage] {
                    #expect(
                        tally.summary(style: style, isViewersMostRecent: isMostRecent)
                            == ReceiptRules.summary(of: found.receipts, in: found.roster, style: style, isViewersMostRecent: isMostRecent),
                        "\(listed.id), \(style)")
                }
            }
        }
        await pool.close()
    }
}
