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
    /// recipients and are left out), by number; `numbers` are the receipts' users' numbers.
    func earliestTimes(of receipts: [UserReceipt], numbers: [Int?]) -> [Date?] {
        var times = [Date?](repeating: nil, count: self.numbers.count)
        for (receipt, number) in zip(receipts, numbers) {
            guard let number else { continue }
            if let earlier = times[number], earlier <= receipt.at { continue }
            times[number] = receipt.at
        }
        return times
    }

    /// Whether each numbered user has one of `numbers`, by number.
    func contains(_ numbers: [Int?]) -> [Bool] {
        var found = [Bool](repeating: false, count: self.numbers.count)
        for case let number? in numbers {
            found[number] = true
        }
        return found
    }
}

/// Numbers the users of one list after another (`RosterIndex.numbers`), taking a user's
/// number from the previous list where the same user stands at the same place.
///
/// The messages of a page list much the same members in much the same order (a read of
/// several messages appends its reader to each of them), and comparing an id with the one
/// at its place in the previous list is cheaper than hashing it again: a page of a
/// 1,000-member group looks up 100,000 ids.
struct RosterNumbering {
    private let index: RosterIndex
    private var previousUsers: [String] = []
    private var previousNumbers: [Int?] = []

    init(_ index: RosterIndex) {
        self.index = index
    }

    /// Each user's number in the roster, `nil` for users without a period.
    mutating func numbers(of users: [String]) -> [Int?] {
        var numbers: [Int?] = []
        numbers.reserveCapacity(users.count)
        for (place, user) in users.enumerated() {
            if place < self.previousUsers.count, self.previousUsers[place] == user {
                numbers.append(self.previousNumbers[place])
            } else {
                numbers.append(self.index.numbers[user])
            }
        }
        self.previousUsers = users
        self.previousNumbers = numbers
        return numbers
    }
}
