/// The short text an app puts on its unread badge.
///
/// Computed on the server so every client shows the same thing and no client has to know
/// the cap: a count as text, `"99+"` above 99, and `""` (no badge) for zero.
public enum UnreadBadge {
    /// The largest count shown exactly; anything above reads `"99+"`.
    public static let maximumShownCount = 99

    /// The badge for `count` unread messages.
    public static func text(for count: Int) -> String {
        if count <= 0 { return "" }
        if count > maximumShownCount { return "\(maximumShownCount)+" }
        return String(count)
    }
}
