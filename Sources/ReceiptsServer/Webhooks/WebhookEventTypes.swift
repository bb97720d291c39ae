/// The event types a webhook's `events` filter may name, in the contract's order (the check
/// of a `PUT`: an unknown type is 400), and the filter of a webhook that names none. A new
/// type of the event log becomes available to webhooks by being added here.
enum WebhookEventTypes {
    /// What a webhook created without `events` receives: the contract's four receipt types.
    static let byDefault: [String] = [
        "message.created",
        "receipt.delivered",
        "receipt.read",
        "unread.changed",
    ]

    /// Every type a filter may name: the default ones, and the deletes, erasures, edits and imports,
    /// which a webhook receives when it names them.
    static let known: [String] = byDefault + [
        "message.deleted",
        "chat.deleted",
        "user.erased",
        "message.edited",
        "chat.imported",
    ]

    /// The type of the entry a batch starts with when the next event is no longer retained;
    /// sent whatever the filter.
    static let resyncRequired = "resync.required"
}
