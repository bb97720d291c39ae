import Foundation
import ReceiptsCore

/// Marking as the store does it: repeats are no-ops and a read also records the delivery
/// it implies, so fixtures hold the same arrays the database would.
extension MessageReceipts {
    /// `user`'s device got the message at `time`.
    mutating func deliver(to user: String, at time: Date = Instants.noon) {
        guard !deliveries.contains(where: { $0.userId == user }) else { return }
        deliveries.append(UserReceipt(userId: user, at: time))
    }

    /// `user` read the message at `time` with read receipts on.
    mutating func read(by user: String, at time: Date = Instants.noon) {
        deliver(to: user, at: time)
        guard !visibleReads.contains(where: { $0.userId == user }), !hiddenReaders.contains(user) else { return }
        visibleReads.append(UserReceipt(userId: user, at: time))
    }

    /// `user` read the message at `time` with read receipts off.
    mutating func readHidden(by user: String, at time: Date = Instants.noon) {
        deliver(to: user, at: time)
        guard !visibleReads.contains(where: { $0.userId == user }) else { return }
        hiddenReaders.insert(user)
    }
}
