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
--
-- A view, so that every reader of counts (receipts.unread_count, receipts.unread_counts, the
-- marking function's answer, the unread.changed trigger) gets the rule inlined into its own
-- statement: the two lookups are subplans, set up once per statement and run only in the
-- CASE branch that needs them. (As a PL/pgSQL function of the member row, each count was a
-- call with executor start-up of its own: about 14 % of the database's CPU under single
-- reads.) security_invoker: row-level security applies as the caller, receipts_service, so
-- the view shows only the caller's tenant.
CREATE OR REPLACE VIEW receipts.member_unread WITH (security_invoker = true) AS
SELECT member.tenant_id, member.chat_id, member.user_id, member.left_at, member.marked_unread,
       CASE WHEN member.left_at IS NOT NULL THEN 0 ELSE greatest(
           CASE WHEN member.read_seq >= member.period_after_seq THEN chat.last_seq - member.read_seq
                ELSE (SELECT coalesce(sum(greatest(0, least(coalesce(period.until_seq, chat.last_seq), chat.last_seq)
                                                    - greatest(period.after_seq, member.read_seq))), 0)::bigint
                      FROM receipts.membership_periods AS period
                      WHERE period.tenant_id = member.tenant_id AND period.chat_id = member.chat_id
                        AND period.user_id = member.user_id) END
           - CASE WHEN member.read_seq < chat.last_seq
                  THEN (SELECT count(*) FROM receipts.messages AS own
                        WHERE own.tenant_id = member.tenant_id AND own.chat_id = member.chat_id
                          AND own.sender_id = member.user_id
                          AND own.seq > member.read_seq AND own.seq <= chat.last_seq)
                  ELSE 0 END
           - member.reads_above,
           CASE WHEN member.marked_unread THEN 1 ELSE 0 END)::integer END AS unread_count
FROM receipts.chat_members AS member
JOIN receipts.chats AS chat ON chat.tenant_id = member.tenant_id AND chat.chat_id = member.chat_id;
COMMENT ON VIEW receipts.member_unread IS
    'Every member row with its unread count: from others, sent while a member, not read; at least 1 while marked unread; 0 after leaving.';
GRANT SELECT ON receipts.member_unread TO receipts_service;
