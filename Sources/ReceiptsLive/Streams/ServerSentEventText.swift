/// The text of a Server-Sent Events stream (`GET /v1/events`), written by the stream and, for
/// a live one, by the hub next to the socket (`LiveSink`).
package enum ServerSentEventText {
    /// One event of the stream: `id: <id>`, `data: <json>`, and the blank line that ends it.
    package static func event(id: String, json: String) -> String {
        "id: \(id)\ndata: \(json)\n\n"
    }

    /// The comment that opens the body.
    package static let opening = ": receipts event stream\n\n"

    /// The comment that ends the body when the hub closes the stream.
    package static func closed(_ reason: EventHub.CloseReason) -> String {
        ": closed: \(reason.rawValue)\n\n"
    }
}
