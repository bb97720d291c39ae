/// The event types a webhook's `events` filter may name, in the contract's order: the
/// default filter (all of them) and the check of a `PUT` (an unknown type is 400). A new
/// type of the event log becomes available to webhooks by being added here.
enum WebhookEventTypes {
    static let known: [String] = [
        "message.created",
        "receipt.delivered",
        "receipt.read",
        "unread.changed",
    ]

    /// The type of the entry a batch starts with when the next event is no longer retained;
    /// sent whatever the filter.
    static let resyncRequired = "resync.required"
}
