-- The unread count: the one place its rule is written.
--
-- Everything at or below a member's read watermark (read_seq) is read; above it, the member
-- keeps how many messages they read out of order (reads_above). So a count is arithmetic:
--   messages above the watermark sent while a member - their own among them - reads_above
-- at least 1 while the chat is marked unread, 0 once they left. It costs a few index
-- lookups, whatever the length of the history or the number unread, and fewer in the usual
-- cases:
-- * messages sent while a member: every membership period but the newest ends at or before
--   the newest one begins, so while the watermark is at or above the start of the newest
--   period (period_after_seq), that is last_seq - read_seq; only a member whose watermark is
--   still below their latest rejoin needs the periods;
-- * their own messages above the watermark: none when the watermark is at the newest message.
-- Those two pieces are receipts.messages_to_read (sql/functions/membership.sql), which a read
-- also uses for what its watermark passes (receipts.mark_read_each).
--
-- A view, so that every reader of counts (receipts.unread_count, receipts.unread_counts, the
-- marking function's answer, the unread.changed trigger) gets the rule inlined into its own
-- statement: messages_to_read is SQL and inlined, so its two lookups are subplans, set up
-- once per statement and run only in the CASE branch that needs them. (As a PL/pgSQL
-- function of the member row, each count was a call with executor start-up of its own:
-- about 14 % of the database's CPU under single reads.) security_invoker: row-level security
-- applies as the caller, receipts_service, so the view shows only the caller's tenant.
CREATE OR REPLACE VIEW receipts.member_unread WITH (security_invoker = true) AS
SELECT member.tenant_id, member.chat_id, member.user_id, member.left_at, member.marked_unread,
       CASE WHEN member.left_at IS NOT NULL THEN 0 ELSE greatest(
           (SELECT pending.messages
            FROM receipts.messages_to_read(member.tenant_id, member.chat_id, member.user_id, member.read_seq, chat.last_seq,
                                           member.period_after_seq) AS pending)
           - member.reads_above,
           CASE WHEN member.marked_unread THEN 1 ELSE 0 END)::integer END AS unread_count,
       member.muted,
       -- Unread mentions: the member's rows of receipts.mentions still unread
       -- (receipts.still_unread, inlined: its seq > read_seq bounds the scan; a mention row
       -- is only ever of a message the member was to read, so the rest of receipts.unread_by
       -- holds already); none to look for when the chat's newest message with mentions is at
       -- or below the watermark.
       CASE WHEN member.left_at IS NOT NULL OR chat.last_mention_seq <= member.read_seq THEN 0 ELSE (
           SELECT count(*) FROM receipts.mentions AS mention
           CROSS JOIN LATERAL receipts.still_unread(member.tenant_id, member.chat_id, member.user_id, member.receipt_chunk,
                                                    member.read_seq, member.reads_above, mention.seq) AS rule
           WHERE mention.tenant_id = member.tenant_id AND mention.chat_id = member.chat_id
             AND mention.user_id = member.user_id AND rule.unread
       )::integer END AS unread_mentions,
       -- What receipts.unread_counts needs to find the unread replies.
       member.read_seq, member.reads_above, member.period_after_seq, member.receipt_chunk, chat.last_reply_seq
FROM receipts.chat_members AS member
JOIN receipts.chats AS chat ON chat.tenant_id = member.tenant_id AND chat.chat_id = member.chat_id;
COMMENT ON VIEW receipts.member_unread IS
    'Every member row with its unread count (from others, sent while a member, not read; at least 1 while marked unread; 0 after leaving), whether they muted the chat, and their unread mentions.';
GRANT SELECT ON receipts.member_unread TO receipts_service;
