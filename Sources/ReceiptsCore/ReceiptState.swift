/// How far a message has got with all of its recipients.
///
/// The state only advances when *every* recipient has reached it, so a group message is
/// `read` only when all recipients read it. A message without recipients stays `sent`:
/// nobody can receive it, so claiming more would be false.
public enum ReceiptState: String, Sendable, Codable {
    /// Stored, but not yet delivered to every recipient (or there are none).
    case sent
    /// Delivered to every recipient, not yet read by all of them.
    case delivered
    /// Visibly read by every recipient.
    case read
}
