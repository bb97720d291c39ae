-- 0010: unread counts from the member row in hand; membership checked from it too.
--
-- Every read computed its reader's unread count twice, each time with receipts.unread_count
-- looking the member and chat rows up again: once in the unread.changed event
-- (record_unread_changes) and once in mark_read_each's answer, though both statements had
-- the rows already. track_functions under the bench's single reads: unread_count ran twice
-- a read, 0.06 ms each, a third of mark_read_each's time. receipts.unread_of does the
-- arithmetic of unread_count (0006) on a member row and its chat's last_seq; the trigger
-- and mark_read_each pass the rows they hold, and unread_count is now the lookup plus
-- unread_of. pgbench, one client, batches of ten reads in ten chats, six interleaved
-- rounds: 2.66 ms a batch before this migration, 2.11 after (with the shortcut below).
-- (unread_counts keeps the arithmetic written out in its one query: a function call per
-- chat would cost the list of a user in a thousand chats more than the lookups it saves.)

CREATE FUNCTION receipts.unread_of(p_member receipts.chat_members, p_last_seq bigint)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
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

-- record_unread_changes as in 0004, with the count from the updated row.
CREATE OR REPLACE FUNCTION receipts.record_unread_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, data, audience)
    SELECT after.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), 'unread.changed',
           after.chat_id, after.user_id,
           jsonb_build_object('unreadCount', receipts.unread_of(after, chat.last_seq), 'markedUnread', after.marked_unread),
           ARRAY[after.user_id::text]
    FROM updated_after AS after
    JOIN updated_before AS before USING (tenant_id, chat_id, user_id)
    JOIN receipts.chats AS chat ON chat.tenant_id = after.tenant_id AND chat.chat_id = after.chat_id
    WHERE after.read_seq <> before.read_seq
       OR after.marked_unread <> before.marked_unread
       OR after.last_read_at IS DISTINCT FROM before.last_read_at
       OR (after.left_at IS NOT NULL AND before.left_at IS NULL)
    ORDER BY after.tenant_id, after.chat_id, after.user_id;
    IF FOUND THEN
        PERFORM receipts.wake_listeners();
    END IF;
    RETURN NULL;
END;
$$;

-- mark_read_each as in 0008, with the count from the member row its answer joins, and one
-- more shortcut: a message above the start of the reader's newest membership period
-- (chat_members.period_after_seq, 0006) was sent while they were a member, so only a
-- message below it needs receipts.membership_seqs, a function call and a statement per read
-- (3,571 calls a second under the bench's single reads, 8.5 % of the batch slot's time).
-- pgbench as above, seven interleaved rounds: 2.92 ms a batch without it, 2.47 with it.
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
          -- Sent while a member: at once when above the start of their newest period.
          AND CASE WHEN message.seq > member.period_after_seq THEN true
                   ELSE message.seq <@ receipts.membership_seqs(p_tenant, request.chat, request.reader) END
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
           CASE WHEN member.user_id IS NOT NULL THEN receipts.unread_of(member, chat.last_seq) ELSE 0 END
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
