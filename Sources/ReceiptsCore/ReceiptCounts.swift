import Foundation

/// The numbers behind a receipt — Y, D, X and the all-read time — and the state they imply.
///
/// Kept apart from the label wording so that every style reads the same counts and the
/// state rule lives in one place. Internal: callers get these through `ReceiptSummary`.
struct ReceiptCounts: Sendable, Hashable {
    /// Y: the message's recipients.
    var recipients: Int
    /// D: recipients it was delivered to.
    var delivered: Int
    /// X: recipients who visibly read it.
    var read: Int
    /// The latest visible read once every recipient has read; `nil` before that, and
    /// always `nil` without recipients (nobody read it, so it never "became read").
    var readAt: Date?

    /// Counts the per-recipient statuses, so the summary can never disagree with the
    /// `recipients` list the sender sees beside it.
    init(statuses: [RecipientStatus]) {
        let readTimes = statuses.compactMap(\.readAt)
        self.recipients = statuses.count
        self.delivered = statuses.count { $0.deliveredAt != nil }
        self.read = readTimes.count
        self.readAt = statuses.isEmpty || readTimes.count < statuses.count ? nil : readTimes.max()
    }

    /// The counts of `ReceiptRules.recipientStatuses(of:in:)` for `message`, without listing
    /// the statuses: the same rules (a recipient had a period containing the message, is not
    /// its sender, and is a member now or visibly read it; delivery is a delivery or a visible
    /// read; each user's earliest times count), computed over the roster's numbered users.
    /// Delivery times are not needed (a page of messages does not read them).
    init(of message: MessageReceipts, in roster: ChatRoster) {
        var tally = ReceiptTally(seq: message.seq, senderId: message.senderId, in: roster)
        for user in message.deliveredTo { tally.delivered(to: user) }
        for read in message.visibleReads { tally.read(by: read.userId, at: read.at) }
        self.init(tally)
    }

    /// The counts of the deliveries and reads `tally` took in.
    init(_ tally: ReceiptTally) {
        let index = tally.roster.index
        let sender = index.numbers[tally.senderId]
        var counted = [Bool](repeating: false, count: index.count)
        var recipients = 0, delivered = 0, read = 0
        var latestRead: Date?
        for (number, period) in index.periods where number != sender && !counted[number] && period.contains(seq: tally.seq) {
            let readAt = tally.readAt[number]
            guard index.isCurrent[number] || readAt != nil else { continue }
            counted[number] = true
            recipients += 1
            if tally.isDelivered[number] || readAt != nil { delivered += 1 }
            if let readAt {
                read += 1
                if latestRead.map({ readAt > $0 }) ?? true { latestRead = readAt }
            }
        }
        self.recipients = recipients
        self.delivered = delivered
        self.read = read
        self.readAt = recipients == 0 || read < recipients ? nil : latestRead
    }

    /// Whether there is someone to wait for and every one of them has it on a device.
    var isDeliveredToAll: Bool { recipients > 0 && delivered == recipients }

    /// Whether there is someone to wait for and every one of them visibly read it.
    var isReadByAll: Bool { recipients > 0 && read == recipients }

    /// `sent` without recipients; otherwise the furthest stage every recipient reached.
    var state: ReceiptState {
        if isReadByAll { return .read }
        if isDeliveredToAll { return .delivered }
        return .sent
    }
}
