import Foundation

/// A message's receipts as the counts read them (`ReceiptRules.summary(of:…)`): its place
/// and sender, who has it, and who visibly read it when, each user as the UTF-8 bytes of
/// their id.
///
/// `MessageReceipts` is one. A page of messages read from the database is another, whose
/// lists are the bytes the database sent: a page of a 1,000-member group holds 100,000 ids,
/// and making a `String` of each, to look it up and write it out again, was a third of the
/// page's time.
public protocol ReceiptLists {
    /// The message's position in its chat; compared with membership periods.
    var seq: Int64 { get }
    /// The author, who is never a recipient of their own message.
    var senderId: String { get }
    /// Calls `body` with each delivery's user, in the stored order.
    func forEachDelivery(_ body: (UnsafeRawBufferPointer) -> Void)
    /// Calls `body` with each visible read's user and time, in the stored order.
    func forEachVisibleRead(_ body: (UnsafeRawBufferPointer, Date) -> Void)
}

extension MessageReceipts: ReceiptLists {
    public func forEachDelivery(_ body: (UnsafeRawBufferPointer) -> Void) {
        for user in self.deliveredTo {
            user.withUTF8Bytes(body)
        }
    }

    public func forEachVisibleRead(_ body: (UnsafeRawBufferPointer, Date) -> Void) {
        for read in self.visibleReads {
            read.userId.withUTF8Bytes { body($0, read.at) }
        }
    }
}

extension String {
    /// Calls `body` with the string's UTF-8 bytes (copied into contiguous memory first when
    /// they are not already).
    func withUTF8Bytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        var text = self
        return try text.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
    }
}
