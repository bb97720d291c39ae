import Foundation

/// A chat's users numbered from 0, with their membership periods and whether they are members
/// now: what `ReceiptCounts` needs of a `ChatRoster` for every message of a page, prepared once.
///
/// A page of 50 messages of a 1,000-member group counts 50 times over the same members; with
/// this, a message costs one dictionary lookup per receipt and a pass over the periods,
/// instead of sets of user ids built for every message.
struct RosterIndex: Sendable {
    /// Each user's number.
    let numbers: [String: Int]
    /// The periods, each with its user's number.
    let periods: [(number: Int, period: MembershipPeriod)]
    /// By number: whether the user is a member now.
    let isCurrent: [Bool]

    init(periods: [MembershipPeriod], currentMembers: Set<String>) {
        var numbers: [String: Int] = [:]
        numbers.reserveCapacity(periods.count)
        var isCurrent: [Bool] = []
        self.periods = periods.map { period in
            if let number = numbers[period.userId] { return (number, period) }
            let number = numbers.count
            numbers[period.userId] = number
            isCurrent.append(currentMembers.contains(period.userId))
            return (number, period)
        }
        self.numbers = numbers
        self.isCurrent = isCurrent
    }

    /// Each numbered user's earliest time in `receipts` (users without a period are no
    /// recipients and are left out), by number.
    func earliestTimes(of receipts: [UserReceipt]) -> [Date?] {
        var times = [Date?](repeating: nil, count: self.numbers.count)
        for receipt in receipts {
            guard let number = self.numbers[receipt.userId] else { continue }
            if let earlier = times[number], earlier <= receipt.at { continue }
            times[number] = receipt.at
        }
        return times
    }

    /// Whether each numbered user is among `users`, by number.
    func contains(_ users: [String]) -> [Bool] {
        var found = [Bool](repeating: false, count: self.numbers.count)
        for user in users {
            if let number = self.numbers[user] { found[number] = true }
        }
        return found
    }
}
