-- 0006: unread counts skip their lookups where the answer is known without them.
--
-- A count is (messages above the watermark sent while a member) - (own messages there) -
-- reads_above (0002). Both terms cost an index lookup, and for a user in a thousand chats
-- the two lookups per chat were most of the unread list's time. Two shortcuts:
--
-- * Messages sent while a member: every membership period but the newest ends at or before
--   the newest one begins, so while the watermark is at or above the start of the newest
--   period, only that period counts: last_seq - read_seq. chat_members now keeps that start
--   (period_after_seq); only a member whose watermark is still below their latest rejoin
--   needs the periods.
-- * Own messages above the watermark: none when the watermark is at the newest message.

ALTER TABLE receipts.chat_members ADD COLUMN period_after_seq bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN receipts.chat_members.period_after_seq IS
    'after_seq of the member''s newest membership period: while read_seq >= it, unread counts need no look at the periods.';
UPDATE receipts.chat_members AS member SET period_after_seq = newest.after_seq
FROM (
    SELECT period.tenant_id, period.chat_id, period.user_id, max(period.after_seq) AS after_seq
    FROM receipts.membership_periods AS period
    GROUP BY period.tenant_id, period.chat_id, period.user_id
) AS newest
WHERE member.tenant_id = newest.tenant_id AND member.chat_id = newest.chat_id AND member.user_id = newest.user_id
  AND member.period_after_seq <> newest.after_seq;

-- join_chat as in 0002, except that a member (new or rejoining) records where their newest
-- period starts. (put_chat's members start at 0, the column's default.)
CREATE OR REPLACE FUNCTION receipts.join_chat(p_tenant text, p_chat text, p_user text)
RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_kind text;
    v_last_seq bigint;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    -- Locking the chat row orders the join against sends: the new period starts exactly
    -- after the last message sent before it.
    SELECT chat.kind, chat.last_seq INTO v_kind, v_last_seq FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'chat_not_found';
    END IF;
    IF EXISTS (
        SELECT FROM receipts.chat_members AS member
        WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
          AND member.left_at IS NULL
    ) THEN
        RETURN 'already_member';
    END IF;
    IF v_kind = 'direct' THEN
        RETURN 'direct_chat';
    END IF;
    -- A new member has nothing to read from before they joined: their watermarks start
    -- there. A rejoining member keeps theirs (earlier periods may still hold unread messages).
    INSERT INTO receipts.chat_members AS member (tenant_id, chat_id, user_id, read_seq, delivered_seq, period_after_seq)
    VALUES (p_tenant, p_chat, p_user, v_last_seq, v_last_seq, v_last_seq)
    ON CONFLICT (tenant_id, chat_id, user_id) DO UPDATE SET left_at = NULL, joined_at = now(), period_after_seq = v_last_seq;
    INSERT INTO receipts.membership_periods AS period (tenant_id, chat_id, user_id, after_seq)
    VALUES (p_tenant, p_chat, p_user, v_last_seq)
    ON CONFLICT (tenant_id, chat_id, user_id, after_seq)
        DO UPDATE SET until_seq = NULL, left_at = NULL, joined_at = now();
    RETURN 'joined';
END;
$$;
COMMENT ON FUNCTION receipts.join_chat(text, text, text) IS
    'Adds a member to a group: joined | already_member | direct_chat | chat_not_found. A rejoin starts a new membership period.';

-- unread_count and unread_counts as in 0002, with the two shortcuts.
CREATE OR REPLACE FUNCTION receipts.unread_count(p_tenant text, p_chat text, p_user text)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        -- receipts.recipient_seqs - receipts.own_messages - reads_above, written out: this
        -- runs on every read and in every unread.changed event.
        SELECT CASE WHEN member.left_at IS NOT NULL THEN 0 ELSE greatest(
                   CASE WHEN member.read_seq >= member.period_after_seq THEN chat.last_seq - member.read_seq
                        ELSE (SELECT coalesce(sum(greatest(0, least(coalesce(period.until_seq, chat.last_seq), chat.last_seq)
                                                         - greatest(period.after_seq, member.read_seq))), 0)::bigint
                              FROM receipts.membership_periods AS period
                              WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = p_user) END
                   - CASE WHEN member.read_seq >= chat.last_seq THEN 0
                          ELSE (SELECT count(*) FROM receipts.messages AS message
                                WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat AND message.sender_id = p_user
                                  AND message.seq > member.read_seq AND message.seq <= chat.last_seq) END
                   - member.reads_above,
                   CASE WHEN member.marked_unread THEN 1 ELSE 0 END)::integer END
        FROM receipts.chat_members AS member
        JOIN receipts.chats AS chat USING (tenant_id, chat_id)
        WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
    );
END;
$$;
COMMENT ON FUNCTION receipts.unread_count(text, text, text) IS
    'Unread messages of one chat for a user: from others, sent while a member, not read; at least 1 while marked unread. Constant cost: arithmetic on the read watermark.';

CREATE OR REPLACE FUNCTION receipts.unread_counts(p_tenant text, p_user text)
RETURNS TABLE (chat_id text, unread_count integer, marked_unread boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    -- receipts.unread_count for every current chat of the user, as one query: at most two
    -- index lookups per chat, however long the chats' histories and however much is unread.
    RETURN QUERY
    SELECT counted.chat_id::text, counted.unread_count::integer, counted.marked_unread
    FROM (
        SELECT member.chat_id, member.marked_unread, greatest(
                   CASE WHEN member.read_seq >= member.period_after_seq THEN chat.last_seq - member.read_seq
                        ELSE (SELECT coalesce(sum(greatest(0, least(coalesce(period.until_seq, chat.last_seq), chat.last_seq)
                                                         - greatest(period.after_seq, member.read_seq))), 0)::bigint
                              FROM receipts.membership_periods AS period
                              WHERE period.tenant_id = member.tenant_id AND period.chat_id = member.chat_id
                                AND period.user_id = member.user_id) END
                   - CASE WHEN member.read_seq >= chat.last_seq THEN 0
                          ELSE (SELECT count(*) FROM receipts.messages AS message
                                WHERE message.tenant_id = member.tenant_id AND message.chat_id = member.chat_id
                                  AND message.sender_id = member.user_id
                                  AND message.seq > member.read_seq AND message.seq <= chat.last_seq) END
                   - member.reads_above,
                   CASE WHEN member.marked_unread THEN 1 ELSE 0 END) AS unread_count
        FROM receipts.chat_members AS member
        JOIN receipts.chats AS chat USING (tenant_id, chat_id)
        WHERE member.tenant_id = p_tenant AND member.user_id = p_user AND member.left_at IS NULL
        OFFSET 0  -- computed once per chat, not again for the filter below
    ) AS counted
    WHERE counted.unread_count > 0 OR counted.marked_unread
    ORDER BY counted.chat_id;
END;
$$;
COMMENT ON FUNCTION receipts.unread_counts(text, text) IS
    'A user''s chats with unread messages or marked unread, with their counts. From psql: SELECT * FROM receipts.unread_counts(''tenant'', ''user'');';
