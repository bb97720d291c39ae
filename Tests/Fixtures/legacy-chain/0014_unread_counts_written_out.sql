-- 0014: the unread count written out where a batch computes it, instead of a call of
-- receipts.unread_of per row.
--
-- A batch of single reads (mark_read_each) computed each reader's unread count twice: in
-- record_unread_changes, for the unread.changed event, and in the function's answer. Both
-- called receipts.unread_of (0010), a PL/pgSQL function, once per row. Each call sets up
-- its own executor state, and when the reader's watermark is below the chat's last message
-- it runs its count of the reader's own messages as a statement of its own: started,
-- planned from the cache and ended every time. perf of PostgreSQL under the bench's single
-- reads put these nested calls at about 14 % of its CPU; pg_stat_statements showed the
-- count at two calls per read.
--
-- Written out in the statement, the same arithmetic is an expression, and the two lookups
-- are subplans, set up once per statement and run only in the CASE branch that needs them
-- (a member whose watermark is in their newest membership period needs no look at their
-- periods; one who has read everything needs no count). The arithmetic is that of
-- unread_of, which unread_count and mark_read keep using: one row per call there. It is
-- written out twice below, alike; SingleReadBatchTests checks both the answers and the
-- events of batches against mark_read, which calls unread_of.
--
-- pgbench, one client, batches of ten reads (each.sql of BENCHMARKS.md), pg_stat_statements:
-- mark_read_each took 1.39 ms a batch before and 1.18 ms after; its answer 0.142 ms before
-- and 0.067 after; record_unread_changes 0.246 ms before and 0.137 after.

-- mark_read_each as in 0010, with the unread count of its answer written out.
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
           CASE WHEN member.user_id IS NOT NULL THEN CASE WHEN member.left_at IS NOT NULL THEN 0 ELSE greatest(
               CASE WHEN member.read_seq >= member.period_after_seq THEN chat.last_seq - member.read_seq
                    ELSE (SELECT coalesce(sum(greatest(0, least(coalesce(period.until_seq, chat.last_seq), chat.last_seq)
                                                        - greatest(period.after_seq, member.read_seq))), 0)::bigint
                          FROM receipts.membership_periods AS period
                          WHERE period.tenant_id = member.tenant_id AND period.chat_id = member.chat_id AND period.user_id = member.user_id) END
               - CASE WHEN member.read_seq < chat.last_seq
                      THEN (SELECT count(*) FROM receipts.messages AS own
                            WHERE own.tenant_id = member.tenant_id AND own.chat_id = member.chat_id AND own.sender_id = member.user_id
                              AND own.seq > member.read_seq AND own.seq <= chat.last_seq)
                      ELSE 0 END
               - member.reads_above,
               CASE WHEN member.marked_unread THEN 1 ELSE 0 END)::integer END ELSE 0 END
    FROM unnest(p_chats, p_users, v_marked) WITH ORDINALITY AS pair(chat, reader, marked, position)
    LEFT JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = pair.chat
    LEFT JOIN receipts.chat_members AS member
        ON member.tenant_id = p_tenant AND member.chat_id = pair.chat AND member.user_id = pair.reader
       AND member.left_at IS NULL
    ORDER BY pair.position;
END;
$$;

-- record_unread_changes as in 0013, with the unread count written out. The chat's last_seq
-- is read once per changed row, in the subquery, and used by the expression.
CREATE OR REPLACE FUNCTION receipts.record_unread_changes() RETURNS trigger
LANGUAGE plpgsql SET enable_nestloop = off SET enable_mergejoin = off SET enable_hashjoin = on AS $$
BEGIN
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, data, audience)
    SELECT changed.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), 'unread.changed',
           changed.chat_id, changed.user_id,
           jsonb_build_object('unreadCount', CASE WHEN changed.left_at IS NOT NULL THEN 0 ELSE greatest(
               CASE WHEN changed.read_seq >= changed.period_after_seq THEN changed.last_seq - changed.read_seq
                    ELSE (SELECT coalesce(sum(greatest(0, least(coalesce(period.until_seq, changed.last_seq), changed.last_seq)
                                                        - greatest(period.after_seq, changed.read_seq))), 0)::bigint
                          FROM receipts.membership_periods AS period
                          WHERE period.tenant_id = changed.tenant_id AND period.chat_id = changed.chat_id AND period.user_id = changed.user_id) END
               - CASE WHEN changed.read_seq < changed.last_seq
                      THEN (SELECT count(*) FROM receipts.messages AS own
                            WHERE own.tenant_id = changed.tenant_id AND own.chat_id = changed.chat_id AND own.sender_id = changed.user_id
                              AND own.seq > changed.read_seq AND own.seq <= changed.last_seq)
                      ELSE 0 END
               - changed.reads_above,
               CASE WHEN changed.marked_unread THEN 1 ELSE 0 END)::integer END,
                              'markedUnread', changed.marked_unread),
           ARRAY[changed.user_id::text]
    FROM (
        SELECT after.*, (SELECT chat.last_seq FROM receipts.chats AS chat
                         WHERE chat.tenant_id = after.tenant_id AND chat.chat_id = after.chat_id) AS last_seq
        FROM updated_after AS after
        JOIN updated_before AS before USING (tenant_id, chat_id, user_id)
        WHERE after.read_seq <> before.read_seq
           OR after.marked_unread <> before.marked_unread
           OR after.last_read_at IS DISTINCT FROM before.last_read_at
           OR (after.left_at IS NOT NULL AND before.left_at IS NULL)
        ORDER BY after.tenant_id, after.chat_id, after.user_id
        OFFSET 0
    ) AS changed;
    IF FOUND THEN
        PERFORM receipts.wake_listeners();
    END IF;
    RETURN NULL;
END;
$$;
