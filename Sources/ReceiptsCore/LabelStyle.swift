/// The wording of a receipt's `label`, chosen per request with `labels=`.
///
/// Chat apps copy the receipt text of the product they imitate; each style follows one
/// of those product specs (the OpenAPI document, parameter `labels`). The raw values are the query
/// parameter's accepted values.
public enum LabelStyle: String, Sendable, CaseIterable {
    /// "Delivered", "Read", "Read by 2/4", "Read by all": the default.
    case counts
    /// "Sent" / "Delivered" / "Read", mirroring the receipt's `state` like tick marks.
    case ticks
    /// iMessage-like: only under the viewer's most recent message, "Read at 5:42 PM".
    case imessage
}
