import Foundation

/// A chat's users numbered from 0, with their membership periods and whether they are members
/// now: what `ReceiptCounts` needs of a `ChatRoster` for every message of a page, prepared once.
///
/// A page of 50 messages of a 1,000-member group counts 50 times over the same members; with
/// this, a message costs one lookup per receipt and a pass over the periods, instead of sets
/// of user ids built for every message. A caller that reads receipts in another form (the
/// store, from the database's bytes) looks its users up in `users` once and tallies by number
/// (`ReceiptTally`).
struct RosterIndex: Sendable {
    /// The users, each once, in the order of their numbers.
    let users: [String]
    /// The users' numbers, by id.
    let numbers: [String: Int]
    /// The periods, each with its user's number.
    let periods: [(number: Int, period: MembershipPeriod)]
    /// By number: whether the user is a member now.
    let isCurrent: [Bool]

    init(periods: [MembershipPeriod], currentMembers: Set<String>) {
        var numbers: [String: Int] = [:]
        numbers.reserveCapacity(periods.count)
        var users: [String] = []
        self.periods = periods.map { period in
            if let number = numbers[period.userId] { return (number, period) }
            let number = users.count
            numbers[period.userId] = number
            users.append(period.userId)
            return (number, period)
        }
        self.users = users
        self.numbers = numbers
        self.isCurrent = users.map { currentMembers.contains($0) }
    }

    /// How many users are numbered.
    var count: Int { self.users.count }
}
