/// What the receipt rules need to know about a chat.
///
/// Recipients depend on the whole membership history, not just today's members: a user
/// who was a member when a message was sent and read it before leaving still counts.
/// The store loads this once per request and the rules evaluate every message against it.
public struct ChatRoster: Sendable {
    /// Whether the chat is direct or a group; it decides the label wording.
    public var kind: ChatKind
    /// All periods of all users, past and present.
    public var periods: [MembershipPeriod] { didSet { self.index = RosterIndex(periods: self.periods, currentMembers: self.currentMembers) } }
    /// The users who are members now; they are still waited for.
    public var currentMembers: Set<String> { didSet { self.index = RosterIndex(periods: self.periods, currentMembers: self.currentMembers) } }
    /// The two above numbered once per roster, so that counting a message's receipts looks
    /// each receipt up once instead of building sets of the members for every message.
    private(set) var index: RosterIndex

    /// A roster from its stored parts.
    public init(kind: ChatKind, periods: [MembershipPeriod], currentMembers: Set<String>) {
        self.kind = kind
        self.periods = periods
        self.currentMembers = currentMembers
        self.index = RosterIndex(periods: periods, currentMembers: currentMembers)
    }

    /// Every user of `periods`, each once, in the order of the numbers a `ReceiptTally` takes
    /// them by: for a caller that reads receipts in a form of its own (the store, from the
    /// database's bytes) and looks each user up once per roster instead of once per receipt.
    public var numberedUsers: [String] { self.index.users }

    /// The number of `userId` among `numberedUsers`; nil for a user with no period in the chat.
    public func number(of userId: String) -> Int? { self.index.numbers[userId] }

    /// Whether `userId` was a member when the message with this `seq` was sent, in any of
    /// their periods; only such users can be its recipients.
    public func wasMember(_ userId: String, atSeq seq: Int64) -> Bool {
        periods.contains { $0.userId == userId && $0.contains(seq: seq) }
    }
}
