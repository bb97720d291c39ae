-- 0008: batched single reads move their watermarks without helper-function calls.
--
-- mark_read_each (0004) moved each reader's watermark with three PL/pgSQL helpers per
-- reader (first_unread_seq, recipient_seqs, own_messages), each a function call with
-- statements of its own. While the reader's watermark is in their newest membership period
-- (chat_members.period_after_seq, 0006), all three are one query each, written in place:
-- the first unread message is the first one above the watermark that is not theirs and
-- not read by them, every message between the old and new watermark was sent while they
-- were a member, and their own messages there are counted directly. A member still below
-- their latest rejoin takes the helpers as before. pgbench, batches of ten reads, one
-- client: 8.8-9.7 ms a batch before, 8.0 after (with another build on the machine).
-- Everything else is as in 0004.

CREATE OR REPLACE FUNCTION receipts.mark_read_each(p_tenant text, p_chats text[], p_users text[], p_messages text[])
RETURNS TABLE (request integer, outcome text, marked integer, unread_count integer)
-- Up to a hundred requests against tables of any size: always index lookups per request.
-- (The planner, not knowing how many the arrays hold, would hash a whole small table.)
LANGUAGE plpgsql SET enable_hashjoin = off SET enable_mergejoin = off AS $$
#variable_conflict use_column
DECLARE
    v_marked integer[];
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    IF cardinality(p_chats) <> cardinality(p_users) OR cardinality(p_chats) <> cardinality(p_messages) THEN
        RAISE EXCEPTION 'receipts.mark_read_each: % chats, % users, % messages', cardinality(p_chats), cardinality(p_users), cardinality(p_messages);
    END IF;
    IF (SELECT count(DISTINCT (chat, reader)) FROM unnest(p_chats, p_users) AS pair(chat, reader)) <> cardinality(p_chats) THEN
        RAISE EXCEPTION 'receipts.mark_read_each: a (chat, user) appears twice';
    END IF;
    PERFORM FROM receipts.chat_members AS member
    JOIN unnest(p_chats, p_users) AS pair(chat, reader) ON member.chat_id = pair.chat AND member.user_id = pair.reader
    WHERE member.tenant_id = p_tenant AND member.left_at IS NULL
    ORDER BY member.chat_id, member.user_id
    FOR UPDATE OF member;

    -- Which request read something now (1) or not (0), in request order.
    WITH request AS (
        SELECT pair.position::integer AS position, pair.chat, pair.reader, pair.message
        FROM unnest(p_chats, p_users, p_messages) WITH ORDINALITY AS pair(chat, reader, message, position)
    ),
    eligible AS (
        SELECT request.position, message.chat_id, message.message_id, request.reader,
               coalesce(setting.read_receipts, true) AS visible,
               NOT (request.reader = ANY (message.delivered_to)) AS undelivered
        FROM request
        JOIN receipts.chat_members AS member
            ON member.tenant_id = p_tenant AND member.chat_id = request.chat AND member.user_id = request.reader
           AND member.left_at IS NULL
        JOIN receipts.messages AS message
            ON message.tenant_id = p_tenant AND message.chat_id = request.chat AND message.message_id = request.message
        LEFT JOIN receipts.users AS setting ON setting.tenant_id = p_tenant AND setting.user_id = request.reader
        WHERE message.sender_id <> request.reader
          AND NOT (request.reader = ANY (message.read_by)) AND NOT (request.reader = ANY (message.hidden_read_by))
          AND message.seq <@ receipts.membership_seqs(p_tenant, request.chat, request.reader)
    ),
    per_message AS (
        SELECT chat_id, message_id,
               coalesce(array_agg(reader ORDER BY position) FILTER (WHERE visible), '{}') AS visible_readers,
               coalesce(array_agg(reader ORDER BY position) FILTER (WHERE NOT visible), '{}') AS hidden_readers,
               coalesce(array_agg(reader ORDER BY position) FILTER (WHERE undelivered), '{}') AS receivers,
               array_agg(reader) AS readers
        FROM eligible GROUP BY chat_id, message_id
        ORDER BY chat_id, message_id  -- rows are locked in this order, the same in every call
    ),
    updated AS (
        UPDATE receipts.messages AS message SET
            read_by        = message.read_by || per_message.visible_readers,
            read_at        = message.read_at || array_fill(now(), ARRAY[cardinality(per_message.visible_readers)]),
            hidden_read_by = message.hidden_read_by || per_message.hidden_readers,
            delivered_to   = message.delivered_to || per_message.receivers,
            delivered_at   = message.delivered_at || array_fill(now(), ARRAY[cardinality(per_message.receivers)])
        FROM per_message
        WHERE message.tenant_id = p_tenant AND message.chat_id = per_message.chat_id
          AND message.message_id = per_message.message_id
          -- The guard: none of these readers is on the row already.
          AND NOT (message.read_by && per_message.readers) AND NOT (message.hidden_read_by && per_message.readers)
          AND NOT (message.delivered_to && per_message.receivers)
        RETURNING message.chat_id, message.message_id
    )
    SELECT array_agg(CASE WHEN updated.message_id IS NULL THEN 0 ELSE 1 END ORDER BY request.position)
    INTO v_marked
    FROM request
    LEFT JOIN eligible ON eligible.position = request.position
    LEFT JOIN updated ON updated.chat_id = eligible.chat_id AND updated.message_id = eligible.message_id;

    -- Watermarks, as in mark_read, for the members who read something or had a mark. While
    -- a member's watermark is in their newest membership period (0006), the next unread
    -- message is the first one above it, and every message between the old and the new
    -- watermark was sent while they were a member: no look at their periods.
    UPDATE receipts.chat_members AS member SET
        read_seq      = moved.new_read_seq,
        delivered_seq = greatest(member.delivered_seq, moved.new_read_seq),
        reads_above   = member.reads_above + moved.marked
                        - CASE WHEN moved.new_read_seq = member.read_seq THEN 0
                               ELSE CASE WHEN member.read_seq >= member.period_after_seq
                                         THEN moved.new_read_seq - member.read_seq
                                         ELSE receipts.recipient_seqs(p_tenant, member.chat_id, member.user_id, member.read_seq, moved.new_read_seq) END
                                    - (SELECT count(*) FROM receipts.messages AS own
                                       WHERE own.tenant_id = p_tenant AND own.chat_id = member.chat_id AND own.sender_id = member.user_id
                                         AND own.seq > member.read_seq AND own.seq <= moved.new_read_seq) END,
        marked_unread = false,
        last_read_at  = CASE WHEN moved.marked > 0 THEN now() ELSE member.last_read_at END
    FROM (
        SELECT pair.chat, pair.reader, pair.marked,
               coalesce(CASE WHEN current.read_seq >= current.period_after_seq
                             THEN (SELECT message.seq FROM receipts.messages AS message
                                   WHERE message.tenant_id = p_tenant AND message.chat_id = pair.chat
                                     AND message.seq > current.read_seq AND message.seq <= chat.last_seq
                                     AND message.sender_id <> pair.reader
                                     AND NOT (pair.reader = ANY (message.read_by)) AND NOT (pair.reader = ANY (message.hidden_read_by))
                                   ORDER BY message.seq LIMIT 1)
                             ELSE receipts.first_unread_seq(p_tenant, pair.chat, pair.reader, current.read_seq, chat.last_seq) END - 1,
                        chat.last_seq) AS new_read_seq
        FROM unnest(p_chats, p_users, v_marked) AS pair(chat, reader, marked)
        JOIN receipts.chat_members AS current
            ON current.tenant_id = p_tenant AND current.chat_id = pair.chat AND current.user_id = pair.reader
           AND current.left_at IS NULL
        JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = pair.chat
        WHERE pair.marked > 0 OR current.marked_unread
        OFFSET 0  -- new_read_seq computed once per member, not once per use below
    ) AS moved
    WHERE member.tenant_id = p_tenant AND member.chat_id = moved.chat AND member.user_id = moved.reader;

    RETURN QUERY
    SELECT pair.position::integer,
           CASE WHEN member.user_id IS NOT NULL THEN 'marked'
                WHEN chat.chat_id IS NOT NULL THEN 'not_member'
                ELSE 'chat_not_found' END,
           pair.marked,
           CASE WHEN member.user_id IS NOT NULL THEN receipts.unread_count(p_tenant, pair.chat, pair.reader) ELSE 0 END
    FROM unnest(p_chats, p_users, v_marked) WITH ORDINALITY AS pair(chat, reader, marked, position)
    LEFT JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = pair.chat
    LEFT JOIN receipts.chat_members AS member
        ON member.tenant_id = p_tenant AND member.chat_id = pair.chat AND member.user_id = pair.reader
       AND member.left_at IS NULL
    ORDER BY pair.position;
END;
$$;
COMMENT ON FUNCTION receipts.mark_read_each(text, text[], text[], text[]) IS
    'Marks one message read for each (chat, user, message) of the arrays, as many receipts.mark_read calls would, in one statement: one row per request, in order.';
