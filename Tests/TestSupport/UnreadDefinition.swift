/// The unread count's definition, message by message, for tests that compare the service's
/// arithmetic (sql/views/unread.sql) with it. Arguments: tenant, chat, user.
public enum UnreadDefinition {
    /// The definition: messages of others, sent during one of the user's membership
    /// periods, not read by them (visibly or hidden); 0 after leaving; at least 1 when marked.
    public static let countedOneByOne = """
        SELECT CASE WHEN member.left_at IS NOT NULL THEN 0 ELSE greatest(
            (SELECT count(*) FROM receipts.messages AS message
             WHERE message.tenant_id = member.tenant_id AND message.chat_id = member.chat_id
               AND message.sender_id <> member.user_id
               AND NOT EXISTS (
                   SELECT FROM receipts.receipt_chunks AS receipt
                   WHERE receipt.tenant_id = message.tenant_id AND receipt.chat_id = message.chat_id AND receipt.seq = message.seq
                     AND (member.user_id = ANY (receipt.read_by) OR member.user_id = ANY (receipt.hidden_read_by)))
               AND EXISTS (
                   SELECT FROM receipts.membership_periods AS period
                   WHERE period.tenant_id = member.tenant_id AND period.chat_id = member.chat_id
                     AND period.user_id = member.user_id
                     AND message.seq > period.after_seq AND (period.until_seq IS NULL OR message.seq <= period.until_seq))),
            CASE WHEN member.marked_unread THEN 1 ELSE 0 END) END::int8
        FROM receipts.chat_members AS member
        WHERE member.tenant_id = $1 AND member.chat_id = $2 AND member.user_id = $3
        """

    /// Unread mentions by the same definition: of those messages, the ones that name the user
    /// or mentioned everyone; 0 after leaving; a mark of unread adds none.
    public static let mentionsCountedOneByOne = """
        SELECT CASE WHEN member.left_at IS NOT NULL THEN 0 ELSE
            (SELECT count(*) FROM receipts.messages AS message
             WHERE message.tenant_id = member.tenant_id AND message.chat_id = member.chat_id
               AND message.sender_id <> member.user_id
               AND (member.user_id = ANY (message.mentions) OR message.mentions_all)
               AND NOT EXISTS (
                   SELECT FROM receipts.receipt_chunks AS receipt
                   WHERE receipt.tenant_id = message.tenant_id AND receipt.chat_id = message.chat_id AND receipt.seq = message.seq
                     AND (member.user_id = ANY (receipt.read_by) OR member.user_id = ANY (receipt.hidden_read_by)))
               AND EXISTS (
                   SELECT FROM receipts.membership_periods AS period
                   WHERE period.tenant_id = member.tenant_id AND period.chat_id = member.chat_id
                     AND period.user_id = member.user_id
                     AND message.seq > period.after_seq AND (period.until_seq IS NULL OR message.seq <= period.until_seq)))
            END::int8
        FROM receipts.chat_members AS member
        WHERE member.tenant_id = $1 AND member.chat_id = $2 AND member.user_id = $3
        """
}
