/// The contract's shapes under short names; they are the generated types themselves
/// (`Components.Schemas`), so the face and `generated` speak the same values.
extension ReceiptsClient {
    public typealias Tenant = Components.Schemas.Tenant
    public typealias Token = Components.Schemas.Token
    public typealias Chat = Components.Schemas.Chat
    public typealias ChatKind = Components.Schemas.Chat.KindPayload
    public typealias Message = Components.Schemas.Message
    /// A thread's root's summary (`Message.thread`): `replies`, `lastReplyAt`.
    public typealias ThreadSummary = Components.Schemas.ThreadSummary
    public typealias Receipt = Components.Schemas.Receipt
    public typealias RecipientStatus = Components.Schemas.RecipientStatus
    public typealias MarkReadResult = Components.Schemas.MarkReadResponse
    public typealias MarkDeliveredResult = Components.Schemas.MarkDeliveredResponse
    public typealias UnreadCounts = Components.Schemas.UnreadList
    public typealias Settings = Components.Schemas.Settings
    /// A member's settings of one chat (`muted`).
    public typealias MemberSettings = Components.Schemas.MemberSettings
    /// The style of `Receipt.label`: `counts` (default), `ticks` or `imessage`.
    public typealias LabelStyle = Components.Parameters.Labels
}
