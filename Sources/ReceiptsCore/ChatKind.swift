/// Whether a chat is a one-to-one conversation or a group.
///
/// The kind changes how receipts read: a direct chat has at most one recipient, so its
/// labels say "Read" rather than counting readers. The raw values are the `kind` strings
/// of the JSON contract and of the database.
public enum ChatKind: String, Sendable, Codable, CaseIterable {
    /// Exactly two members; cannot grow.
    case direct
    /// Any number of members, who may join and leave.
    case group
}
