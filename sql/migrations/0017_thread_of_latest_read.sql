-- 0017: which thread a member's latest read was in, so that its unread.changed can carry that
-- thread's new counts (threadId, threadUnreadCount, threadMentions; sql/triggers/events.sql).
-- receipts.mark_read_each writes it in the same UPDATE that moves the member's watermark: the
-- root of the thread whose replies the read marked, or null when it marked replies of none or
-- of several (a read of the whole chat). The trigger reads it only for a read that marked
-- something (last_read_at moved), so a stale value after another kind of update is never seen.

ALTER TABLE receipts.chat_members ADD COLUMN last_read_thread text;
COMMENT ON COLUMN receipts.chat_members.last_read_thread IS
    'The root of the one thread whose replies the member''s latest read marked (null: none, or several); unread.changed carries that thread''s counts.';
