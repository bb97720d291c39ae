CREATE OR REPLACE FUNCTION receipts.own_messages(p_tenant text, p_chat text, p_user text, p_after bigint, p_through bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT count(*) FROM receipts.messages AS message
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat AND message.sender_id = p_user
          AND message.seq > p_after AND message.seq <= p_through
    );
END;
$$;
COMMENT ON FUNCTION receipts.own_messages(text, text, text, bigint, bigint) IS
    'How many messages with p_after < seq <= p_through the user sent (they are never unread for them).';

CREATE OR REPLACE FUNCTION receipts.unread_of(p_member receipts.chat_members, p_last_seq bigint)
RETURNS integer
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_sent bigint;
    v_own bigint := 0;
BEGIN
    IF p_member.left_at IS NOT NULL THEN
        RETURN 0;
    END IF;
    IF p_member.read_seq >= p_member.period_after_seq THEN
        v_sent := p_last_seq - p_member.read_seq;
    ELSE
        SELECT coalesce(sum(greatest(0, least(coalesce(period.until_seq, p_last_seq), p_last_seq)
                                        - greatest(period.after_seq, p_member.read_seq))), 0)
        INTO v_sent
        FROM receipts.membership_periods AS period
        WHERE period.tenant_id = p_member.tenant_id AND period.chat_id = p_member.chat_id AND period.user_id = p_member.user_id;
    END IF;
    IF p_member.read_seq < p_last_seq THEN
        SELECT count(*) INTO v_own FROM receipts.messages AS message
        WHERE message.tenant_id = p_member.tenant_id AND message.chat_id = p_member.chat_id AND message.sender_id = p_member.user_id
          AND message.seq > p_member.read_seq AND message.seq <= p_last_seq;
    END IF;
    RETURN greatest(v_sent - v_own - p_member.reads_above, CASE WHEN p_member.marked_unread THEN 1 ELSE 0 END);
END;
$$;
COMMENT ON FUNCTION receipts.unread_of(receipts.chat_members, bigint) IS
    'Unread messages of a member row, given its chat''s last_seq: what unread_count answers, without the lookups.';

CREATE OR REPLACE FUNCTION receipts.unread_count(p_tenant text, p_chat text, p_user text)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT receipts.unread_of(member, chat.last_seq)
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
