import Foundation
@testable import ReceiptsCore
import Testing

@Suite("Counts without listing the recipients")
struct ReceiptCountsTests {
    /// `ReceiptRules.summary` counts through the roster's numbered users (`RosterIndex`); the
    /// counts must be those of the sender's `recipients` list for any membership history and
    /// any stored receipts, repeats, strangers and the sender included.
    @Test("the counts of a message equal those of its recipient statuses, over random histories")
    func randomHistories() {
        var generator = SplitMix64(seed: 15)
        let users = (0..<12).map { "user\($0)" }
        let base = Date(timeIntervalSince1970: 1_795_000_000)
        for _ in 0..<2_000 {
            var periods: [MembershipPeriod] = []
            var current = Set<String>()
            for user in users where Int.random(in: 0..<5, using: &generator) > 0 {
                var after = Int64.random(in: 0...4, using: &generator)
                for _ in 0..<Int.random(in: 1...3, using: &generator) {
                    let open = Bool.random(using: &generator)
                    let until = open ? nil : after + Int64.random(in: 0...4, using: &generator)
                    periods.append(MembershipPeriod(userId: user, afterSeq: after, untilSeq: until))
                    guard let until else { current.insert(user); break }
                    after = until + Int64.random(in: 0...3, using: &generator)
                }
            }
            periods.shuffle(using: &generator)
            let roster = ChatRoster(kind: Bool.random(using: &generator) ? .group : .direct, periods: periods, currentMembers: current)
            func receipts() -> [UserReceipt] {
                (0..<Int.random(in: 0...16, using: &generator)).map { _ in
                    UserReceipt(userId: (users + ["stranger"]).randomElement(using: &generator)!,
                                at: base + Double(Int.random(in: 0...20, using: &generator)))
                }
            }
            let message = MessageReceipts(
                seq: Int64.random(in: 1...12, using: &generator), senderId: users.randomElement(using: &generator)!,
                deliveries: receipts(), visibleReads: receipts(),
                hiddenReaders: Set(receipts().map(\.userId)))
            let listed = ReceiptCounts(statuses: ReceiptRules.recipientStatuses(of: message, in: roster))
            #expect(ReceiptCounts(of: message, in: roster) == listed)
        }
    }

    /// The store reads a page's lists as the database's bytes, looks each user up in
    /// `numberedUsers` its own way and tallies by number: the same users, by number, must count
    /// the same as the lists given as strings, whatever their ids (long ones, ones that differ
    /// in one byte, strangers, the sender).
    @Test("receipts tallied by the roster's user numbers count as the same lists given as strings")
    func tallyByNumber() {
        var generator = SplitMix64(seed: 16)
        let users = (0..<40).map { "user\($0)" } + ["a-member-with-a-long-id-that-is-not-a-small-string", "user1x", "User1", "u"]
        let base = Date(timeIntervalSince1970: 1_795_000_000)
        for _ in 0..<300 {
            let members = users.filter { _ in Int.random(in: 0..<4, using: &generator) > 0 }
            let periods = members.map { MembershipPeriod(userId: $0, afterSeq: Int64.random(in: 0...3, using: &generator), untilSeq: nil) }
            let roster = ChatRoster(kind: .group, periods: periods, currentMembers: Set(members.filter { _ in Bool.random(using: &generator) }))
            let readers = (users + ["stranger", "user10000"]).shuffled(using: &generator)
            let read = Array(readers.prefix(Int.random(in: 0...readers.count, using: &generator)))
            let delivered = Array(readers.prefix(Int.random(in: 0...readers.count, using: &generator)))
            let message = MessageReceipts(
                seq: Int64.random(in: 1...4, using: &generator), senderId: members.first ?? "user0",
                deliveredTo: delivered, deliveredAt: delivered.map { _ in base },
                visibleReads: read.map { UserReceipt(userId: $0, at: base + Double(Int.random(in: 0...20, using: &generator))) },
                hiddenReaders: [])
            var tally = ReceiptTally(seq: message.seq, senderId: message.senderId, in: roster)
            for user in message.deliveredTo {
                if let number = roster.number(of: user) { tally.delivered(toUserNumber: number) }
            }
            for read in message.visibleReads {
                if let number = roster.number(of: read.userId) { tally.read(byUserNumber: number, at: read.at) }
            }
            let isMostRecent = Bool.random(using: &generator)
            #expect(
                tally.summary(isViewersMostRecent: isMostRecent)
                    == ReceiptRules.summary(of: message, in: roster, isViewersMostRecent: isMostRecent))
        }
    }

    @Test("a roster numbers each user of its periods once, and knows no one else")
    func numberedUsers() {
        let roster = ChatRoster(
            kind: .group,
            periods: [
                MembershipPeriod(userId: "bob", afterSeq: 0, untilSeq: 3), MembershipPeriod(userId: "alice", afterSeq: 0, untilSeq: nil),
                MembershipPeriod(userId: "bob", afterSeq: 5, untilSeq: nil),
            ],
            currentMembers: ["alice", "bob"])
        #expect(roster.numberedUsers == ["bob", "alice"])
        for (number, user) in roster.numberedUsers.enumerated() {
            #expect(roster.number(of: user) == number)
        }
        #expect(roster.number(of: "carol") == nil)
    }

    @Test("a roster changed after it was made counts with its new members")
    func changedRoster() {
        var roster = ChatRoster(kind: .group, periods: [MembershipPeriod(userId: "alice", afterSeq: 0, untilSeq: nil)], currentMembers: ["alice"])
        roster.periods.append(MembershipPeriod(userId: "bob", afterSeq: 0, untilSeq: nil))
        roster.currentMembers.insert("bob")
        let message = MessageReceipts(seq: 1, senderId: "alice", deliveries: [], visibleReads: [UserReceipt(userId: "bob", at: .now)], hiddenReaders: [])
        let counts = ReceiptCounts(of: message, in: roster)
        #expect(counts.recipients == 1)
        #expect(counts.read == 1)
    }
}

/// A small seeded generator, so that a failure repeats.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
