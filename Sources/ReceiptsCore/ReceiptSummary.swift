import Foundation

/// What a sender sees under their message: the `receipt` object of the JSON contract.
///
/// The counts are kept next to the label so that clients that render their own text
/// (or progress rings) do not have to parse the label.
public struct ReceiptSummary: Sendable, Hashable {
    /// How far the message has got with *all* of its recipients.
    public var state: ReceiptState
    /// Y: how many users the message is for (see `ReceiptRules.recipients(of:in:)`).
    public var recipients: Int
    /// D: how many of them have it on a device.
    public var delivered: Int
    /// X: how many of them visibly read it.
    public var read: Int
    /// When the message became read by every recipient (the latest of their reads), or
    /// `nil` until then. Encoded as JSON `null` rather than left out.
    public var readAt: Date?
    /// The text for the requested `LabelStyle`, or `nil` where that style shows nothing.
    /// Encoded as JSON `null` rather than left out.
    public var label: String?

    /// A summary from its parts; normally made by `ReceiptRules.summary(of:in:style:isViewersMostRecent:timeZone:)`.
    public init(state: ReceiptState, recipients: Int, delivered: Int, read: Int, readAt: Date?, label: String?) {
        self.state = state
        self.recipients = recipients
        self.delivered = delivered
        self.read = read
        self.readAt = readAt
        self.label = label
    }
}
