-- Unread counts, read through the view receipts.member_unread (sql/views/unread.sql), which
-- holds the rule.

CREATE OR REPLACE FUNCTION receipts.unread_count(p_tenant text, p_chat text, p_user text)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT unread.unread_count FROM receipts.member_unread AS unread
        WHERE unread.tenant_id = p_tenant AND unread.chat_id = p_chat AND unread.user_id = p_user
    );
END;
$$;
COMMENT ON FUNCTION receipts.unread_count(text, text, text) IS
    'Unread messages of one chat for a user: from others, sent while a member, not read; at least 1 while marked unread. Constant cost: arithmetic on the read watermark.';

-- A member's threads with unread replies in one chat: each thread's unread replies, how many
-- of them mention the user, and the newest one's seq. The unread list's rule for threads, in
-- one place (receipts.unread_counts, and the unread.changed trigger for one thread): the
-- replies unread by the member (receipts.unread_by, inlined: its seq > p_read_seq bounds the
-- scan of the chat's messages). SQL, so each caller inlines it, and a condition on thread_id
-- reaches the scan. The member's columns come from receipts.member_unread.
CREATE OR REPLACE FUNCTION receipts.unread_threads(
    p_tenant text, p_chat text, p_user text, p_read_seq bigint, p_reads_above bigint, p_period_after_seq bigint,
    p_chunk integer)
RETURNS TABLE (thread_id text, unread integer, mentions integer, newest bigint)
LANGUAGE sql STABLE AS $$
    SELECT reply.thread_id::text, count(*)::integer, count(*) FILTER (WHERE p_user = ANY (reply.mentions) OR reply.mentions_all)::integer,
           max(reply.seq)
    FROM receipts.messages AS reply
    CROSS JOIN LATERAL receipts.unread_by(p_tenant, p_chat, p_user, p_chunk, p_read_seq, p_reads_above, p_period_after_seq,
                                          reply.sender_id, reply.seq) AS rule
    WHERE reply.tenant_id = p_tenant AND reply.chat_id = p_chat AND reply.thread_id IS NOT NULL AND rule.unread
    GROUP BY reply.thread_id;
$$;
COMMENT ON FUNCTION receipts.unread_threads(text, text, text, bigint, bigint, bigint, integer) IS
    'A member''s threads with unread replies in a chat (given the member''s read_seq, reads_above, period_after_seq and receipt_chunk): unread replies, those that mention the user, the newest reply''s seq.';

-- One thread's unread replies for a member, and how many of them mention the user (zeros when
-- none is unread, or the user is no member): what unread.changed carries after a read in that
-- thread (sql/triggers/events.sql). A function of its own, planned with nested loops on: the
-- trigger turns them off, and the thread's lookups by key need them. PL/pgSQL, so that its
-- plan is kept for the session: a SQL function with a SET clause is never inlined, and its
-- body was planned again on every call.
CREATE OR REPLACE FUNCTION receipts.unread_in_thread(p_tenant text, p_chat text, p_user text, p_thread text)
RETURNS TABLE (unread integer, mentions integer)
LANGUAGE plpgsql STABLE SET enable_nestloop = on AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT coalesce(sum(counts.unread), 0)::integer, coalesce(sum(counts.mentions), 0)::integer
    FROM receipts.chat_members AS member
    CROSS JOIN LATERAL receipts.unread_threads(member.tenant_id, member.chat_id, member.user_id, member.read_seq,
                                               member.reads_above, member.period_after_seq, member.receipt_chunk) AS counts
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
      AND member.left_at IS NULL AND counts.thread_id = p_thread;
END;
$$;
COMMENT ON FUNCTION receipts.unread_in_thread(text, text, text, text) IS
    'A member''s unread replies in one thread and those that mention them (zeros when none): the counts unread.changed carries after a read in that thread.';

CREATE OR REPLACE FUNCTION receipts.unread_counts(p_tenant text, p_user text)
RETURNS TABLE (chat_id text, unread_count integer, marked_unread boolean, muted boolean, mentions integer, threads jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    -- The count of every current chat of the user, as one query: at most two index lookups
    -- per chat, however long the chats' histories and however much is unread. Then, for the
    -- chats listed that have a reply above the watermark (chats.last_reply_seq), their threads
    -- with unread replies (receipts.unread_threads) as [[thread id, unread, mentions], …]:
    -- newest first, at most 100. A subquery in a CASE: a chat without unread
    -- replies runs none of it (as a join, each chat paid for an empty aggregate: 1,000 chats,
    -- 2.5 ms).
    RETURN QUERY
    SELECT counted.chat_id::text, counted.unread_count, counted.marked_unread, counted.muted, counted.unread_mentions,
           CASE WHEN counted.unread_count > 0 AND counted.last_reply_seq > counted.read_seq THEN (
               SELECT jsonb_agg(jsonb_build_array(thread.thread_id, thread.unread, thread.mentions) ORDER BY thread.newest DESC)
               FROM (
                   SELECT counts.thread_id, counts.unread, counts.mentions, counts.newest
                   FROM receipts.unread_threads(p_tenant, counted.chat_id, p_user, counted.read_seq, counted.reads_above,
                                                counted.period_after_seq, counted.receipt_chunk) AS counts
                   ORDER BY counts.newest DESC
                   LIMIT 100
               ) AS thread)
           END
    FROM (
        SELECT unread.chat_id, unread.unread_count, unread.marked_unread, unread.muted, unread.unread_mentions,
               unread.read_seq, unread.reads_above, unread.period_after_seq, unread.receipt_chunk, unread.last_reply_seq
        FROM receipts.member_unread AS unread
        WHERE unread.tenant_id = p_tenant AND unread.user_id = p_user AND unread.left_at IS NULL
        OFFSET 0  -- computed once per chat, not again for the filter below
    ) AS counted
    WHERE counted.unread_count > 0 OR counted.marked_unread
    ORDER BY counted.chat_id;
END;
$$;
COMMENT ON FUNCTION receipts.unread_counts(text, text) IS
    'A user''s chats with unread messages or marked unread, with their counts, whether the user muted them (muted chats stay out of the total), their unread mentions, and their threads with unread replies ([[thread id, unread, mentions], …], newest first, at most 100; null when none). From psql: SELECT * FROM receipts.unread_counts(''tenant'', ''user'');';

-- The totals of users across all their current chats, as the unread list's top level gives
-- them: total, the unread messages of the chats they did not mute; mentions, their unread
-- mentions in every chat, muted ones included. The event hub adds them to unread.changed as
-- it delivers the event (not when the event is written: a sum over every chat of the user
-- on each read would cost the write path more than the read itself), and only for events
-- that a stream or webhook takes. One row per user asked for (zeros when in no chat).
-- Planned once per session (the same plan fits every user: lookups by key), and never JIT
-- compiled: the view's subplans make its estimate large enough for JIT, whose compilation
-- alone took 0.6 s, where the sum itself takes 0.1 ms for a user in a few chats.
CREATE OR REPLACE FUNCTION receipts.unread_totals(p_tenant text, p_users text[])
RETURNS TABLE (user_id text, total integer, mentions integer)
LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT asked.user_id, coalesce(summed.total, 0)::integer, coalesce(summed.mentions, 0)::integer
    FROM (SELECT DISTINCT asked.user_id FROM unnest(p_users) AS asked(user_id)) AS asked
    CROSS JOIN LATERAL (
        SELECT sum(unread.unread_count) FILTER (WHERE NOT unread.muted) AS total, sum(unread.unread_mentions) AS mentions
        FROM receipts.member_unread AS unread
        WHERE unread.tenant_id = p_tenant AND unread.user_id = asked.user_id AND unread.left_at IS NULL
    ) AS summed
    ORDER BY asked.user_id;
END;
$$;
COMMENT ON FUNCTION receipts.unread_totals(text, text[]) IS
    'Each user''s total unread (chats they muted left out) and unread mentions (every chat) over their current chats: the top of the unread list, for unread.changed as it is delivered. From psql: SELECT * FROM receipts.unread_totals(''tenant'', ARRAY[''user'']);';

-- Mutes or unmutes a chat for one of its current members: set | not_member | chat_not_found.
CREATE OR REPLACE FUNCTION receipts.set_chat_muted(p_tenant text, p_chat text, p_user text, p_muted boolean)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    UPDATE receipts.chat_members AS member SET muted = p_muted
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user AND member.left_at IS NULL;
    IF FOUND THEN
        RETURN 'set';
    ELSIF EXISTS (SELECT FROM receipts.chats AS chat WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat) THEN
        RETURN 'not_member';
    END IF;
    RETURN 'chat_not_found';
END;
$$;
COMMENT ON FUNCTION receipts.set_chat_muted(text, text, text, boolean) IS
    'Mutes (true) or unmutes a chat for a current member: set | not_member | chat_not_found. A muted chat''s unread messages stay out of the member''s total and badge.';
