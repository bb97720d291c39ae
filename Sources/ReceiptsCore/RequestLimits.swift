/// The limits of the API's request bodies that more than the HTTP layer checks: an import's
/// lines (`ImportLineParser`) hold to the same ones as the requests they stand for.
public enum RequestLimits {
    /// The longest message text, in UTF-8 bytes.
    public static let maximumTextBytes = 64 * 1024
    /// The most users a message may name in `mentions`.
    public static let maximumMentions = 100
    /// The most members a chat may be created with.
    public static let maximumMembers = 10_000
}
