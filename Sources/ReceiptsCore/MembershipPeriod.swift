/// One stretch of a user's membership in a chat, measured in message sequence numbers.
///
/// Membership is recorded by `seq` rather than by time because `seq` is what orders a
/// chat's messages: a user is a member *for* a message when it was sent during one of
/// their periods. A user who leaves and rejoins has several periods.
public struct MembershipPeriod: Sendable, Hashable {
    /// The member.
    public var userId: String
    /// The chat's last `seq` when the user joined; messages after it are theirs.
    public var afterSeq: Int64
    /// The chat's last `seq` when the user left, or `nil` while this period is open.
    public var untilSeq: Int64?

    /// A period covering messages with `afterSeq < seq <= untilSeq` (open-ended when
    /// `untilSeq` is `nil`).
    public init(userId: String, afterSeq: Int64, untilSeq: Int64?) {
        self.userId = userId
        self.afterSeq = afterSeq
        self.untilSeq = untilSeq
    }

    /// Whether the message with this `seq` was sent while the user was a member, which
    /// is what makes them one of its possible recipients.
    public func contains(seq: Int64) -> Bool {
        guard seq > afterSeq else { return false }
        guard let untilSeq else { return true }
        return seq <= untilSeq
    }
}
