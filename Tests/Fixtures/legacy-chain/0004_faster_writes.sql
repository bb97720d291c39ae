-- 0004: writes through the service no longer NOTIFY from their own transactions.
--
-- A transaction that calls pg_notify takes one database-wide lock at commit and holds it
-- until its commit record is flushed (PostgreSQL orders the notification queue that way),
-- so every notifying transaction commits alone, one WAL flush after another: measured with
-- pgbench on the 2-core machine, a one-row UPDATE commits 7,700 times a second alone and
-- 2,100 times with a pg_notify beside it.
--
-- So a session may turn the triggers' NOTIFY off with the setting receipts.notify = 'off'.
-- The service sets it on its pool's sessions, wakes its own event hub right after each
-- write commits, and tells other instances with one NOTIFY of its own at a time, sent
-- without waiting for the WAL flush (EventHub.followCommittedWrites). Sessions
-- without the setting (psql, scripts, other tools) notify from the triggers as before.

CREATE FUNCTION receipts.wake_listeners() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('receipts.notify', true) IS DISTINCT FROM 'off' THEN
        PERFORM pg_notify('receipts_events', '');
    END IF;
END;
$$;
COMMENT ON FUNCTION receipts.wake_listeners() IS
    'NOTIFY receipts_events, unless the session set receipts.notify = off (the service announces its own writes).';

CREATE OR REPLACE FUNCTION receipts.record_messages_created() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, audience)
    SELECT created.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), 'message.created',
           created.chat_id, created.sender_id, created.message_ids,
           receipts.chat_audience(created.tenant_id, created.chat_id)
    FROM (
        SELECT tenant_id, chat_id, sender_id, array_agg(message_id ORDER BY seq) AS message_ids
        FROM inserted GROUP BY tenant_id, chat_id, sender_id ORDER BY tenant_id, chat_id, sender_id
    ) AS created;
    IF FOUND THEN
        PERFORM receipts.wake_listeners();
    END IF;
    RETURN NULL;
END;
$$;

-- The trigger pairs each row's old and new version; transition tables have no statistics,
-- and the planner's guess (a few rows) sorts both for a merge join: 30 ms of a read-all of
-- 10,000 messages, against 10 ms for a hash join.
CREATE OR REPLACE FUNCTION receipts.record_receipts() RETURNS trigger
LANGUAGE plpgsql SET enable_mergejoin = off AS $$
BEGIN
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, audience)
    SELECT change.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), change.type,
           change.chat_id, change.user_id, change.message_ids,
           receipts.chat_audience(change.tenant_id, change.chat_id)
    FROM (
        WITH added AS (
            SELECT after.tenant_id, after.chat_id, after.message_id, after.seq,
                   after.read_by[cardinality(before.read_by) + 1:] AS new_readers,
                   after.delivered_to[cardinality(before.delivered_to) + 1:] AS new_deliveries
            FROM updated_after AS after
            JOIN updated_before AS before USING (tenant_id, chat_id, message_id)
        ),
        receipts AS (
            SELECT tenant_id, chat_id, message_id, seq, reader AS user_id, 'receipt.read' AS type
            FROM added, unnest(new_readers) AS reader
            UNION ALL
            SELECT tenant_id, chat_id, message_id, seq, receiver, 'receipt.delivered'
            FROM added, unnest(new_deliveries) AS receiver
            WHERE NOT (receiver = ANY (new_readers))
        )
        SELECT tenant_id, chat_id, user_id, type, array_agg(message_id ORDER BY seq) AS message_ids
        FROM receipts GROUP BY tenant_id, chat_id, user_id, type
        ORDER BY tenant_id, chat_id, user_id, type
    ) AS change;
    IF FOUND THEN
        PERFORM receipts.wake_listeners();
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION receipts.record_unread_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, data, audience)
    SELECT after.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), 'unread.changed',
           after.chat_id, after.user_id,
           jsonb_build_object('unreadCount', receipts.unread_count(after.tenant_id, after.chat_id, after.user_id),
                              'markedUnread', after.marked_unread),
           ARRAY[after.user_id::text]
    FROM updated_after AS after
    JOIN updated_before AS before USING (tenant_id, chat_id, user_id)
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

-- Marking, leaner ------------------------------------------------------------------------
--
-- receipts.mark_read as in 0002, except: a marking that read nothing (a repeat) and did not
-- clear a mark leaves the member row alone (its watermark and count cannot have changed),
-- and after a read of a range the search for the first unread message starts at the end of
-- the range (a read-all of 10,000 messages scanned all of them again).

CREATE OR REPLACE FUNCTION receipts.mark_read(p_tenant text, p_chat text, p_user text, p_message_ids text[], p_up_to text)
RETURNS TABLE (outcome text, marked integer, unread_count integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_read_seq bigint;
    v_last_seq bigint;
    v_marked_unread boolean;
    v_visible boolean;
    v_up_to_seq bigint;
    v_marked integer;
    v_new_read_seq bigint;
    v_recipient_of int8multirange;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT member.read_seq, chat.last_seq, member.marked_unread,
           coalesce((SELECT setting.read_receipts FROM receipts.users AS setting
                     WHERE setting.tenant_id = p_tenant AND setting.user_id = p_user), true),
           receipts.membership_seqs(p_tenant, p_chat, p_user)
    INTO v_read_seq, v_last_seq, v_marked_unread, v_visible, v_recipient_of
    FROM receipts.chat_members AS member
    JOIN receipts.chats AS chat USING (tenant_id, chat_id)
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
      AND member.left_at IS NULL
    FOR UPDATE OF member;
    IF NOT FOUND THEN
        IF EXISTS (SELECT FROM receipts.chats AS chat WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat) THEN
            RETURN QUERY SELECT 'not_member', 0, 0;
        ELSE
            RETURN QUERY SELECT 'chat_not_found', 0, 0;
        END IF;
        RETURN;
    END IF;
    IF p_up_to IS NOT NULL THEN
        SELECT message.seq INTO v_up_to_seq FROM receipts.messages AS message
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat AND message.message_id = p_up_to;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'message_not_found', 0, 0;
            RETURN;
        END IF;
    ELSE
        v_up_to_seq := v_last_seq;
    END IF;

    IF p_message_ids IS NOT NULL THEN
        UPDATE receipts.messages AS message SET
            read_by        = CASE WHEN v_visible THEN array_append(message.read_by, p_user) ELSE message.read_by END,
            read_at        = CASE WHEN v_visible THEN array_append(message.read_at, now()) ELSE message.read_at END,
            hidden_read_by = CASE WHEN v_visible THEN message.hidden_read_by ELSE array_append(message.hidden_read_by, p_user) END,
            delivered_to   = CASE WHEN p_user = ANY (message.delivered_to) THEN message.delivered_to ELSE array_append(message.delivered_to, p_user) END,
            delivered_at   = CASE WHEN p_user = ANY (message.delivered_to) THEN message.delivered_at ELSE array_append(message.delivered_at, now()) END
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
          AND message.message_id = ANY (p_message_ids)
          AND message.sender_id <> p_user
          AND NOT (p_user = ANY (message.read_by)) AND NOT (p_user = ANY (message.hidden_read_by))
          AND message.seq <@ v_recipient_of;
    ELSE
        UPDATE receipts.messages AS message SET
            read_by        = CASE WHEN v_visible THEN array_append(message.read_by, p_user) ELSE message.read_by END,
            read_at        = CASE WHEN v_visible THEN array_append(message.read_at, now()) ELSE message.read_at END,
            hidden_read_by = CASE WHEN v_visible THEN message.hidden_read_by ELSE array_append(message.hidden_read_by, p_user) END,
            delivered_to   = CASE WHEN p_user = ANY (message.delivered_to) THEN message.delivered_to ELSE array_append(message.delivered_to, p_user) END,
            delivered_at   = CASE WHEN p_user = ANY (message.delivered_to) THEN message.delivered_at ELSE array_append(message.delivered_at, now()) END
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
          AND message.seq > v_read_seq AND message.seq <= v_up_to_seq
          AND message.sender_id <> p_user
          AND NOT (p_user = ANY (message.read_by)) AND NOT (p_user = ANY (message.hidden_read_by))
          AND message.seq <@ v_recipient_of;
    END IF;
    GET DIAGNOSTICS v_marked = ROW_COUNT;
    IF v_marked = 0 AND NOT v_marked_unread THEN
        -- Nothing was read now, so the first unread message and the count are as they were.
        RETURN QUERY SELECT 'marked', 0, receipts.unread_count(p_tenant, p_chat, p_user);
        RETURN;
    END IF;

    -- Every message this statement could mark has seq <= the chat's last_seq read now.
    -- The watermark moves to just below the first message still unread; what it passes
    -- was read (now or out of order before), so reads_above drops by that many. After a
    -- read of a range, everything up to its end is read: the search starts there.
    SELECT chat.last_seq,
           coalesce(receipts.first_unread_seq(
                        p_tenant, p_chat, p_user,
                        CASE WHEN p_message_ids IS NULL THEN greatest(v_read_seq, v_up_to_seq) ELSE v_read_seq END,
                        chat.last_seq) - 1,
                    chat.last_seq)
    INTO v_last_seq, v_new_read_seq
    FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat;
    UPDATE receipts.chat_members AS member SET
        read_seq      = v_new_read_seq,
        delivered_seq = greatest(member.delivered_seq, v_new_read_seq),
        reads_above   = member.reads_above + v_marked
                        - (receipts.recipient_seqs(p_tenant, p_chat, p_user, v_read_seq, v_new_read_seq)
                           - receipts.own_messages(p_tenant, p_chat, p_user, v_read_seq, v_new_read_seq)),
        marked_unread = false,
        last_read_at  = CASE WHEN v_marked > 0 THEN now() ELSE member.last_read_at END
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user;
    RETURN QUERY SELECT 'marked', v_marked, receipts.unread_count(p_tenant, p_chat, p_user);
END;
$$;
COMMENT ON FUNCTION receipts.mark_read(text, text, text, text[], text) IS
    'Marks messages read by a user (ids, or up to a message, or all when both are null): marked | not_member | message_not_found | chat_not_found, with how many changed and the new unread count.';

-- Room for receipts -------------------------------------------------------------------------
--
-- A receipt rewrites its message row (the arrays grow). When the new version fits on the
-- same page, PostgreSQL makes it a HOT update: no new entries in the table's three indexes,
-- which perf showed as the largest cost of marking (a read-all of 10,000 messages: 260 ms
-- with full pages, 130 ms with half-empty ones). So new pages of messages are filled to
-- half, and those of chat_members (one row rewritten per marking) to 70 %. The price is
-- disk: messages take about twice the space. Pages written before this migration keep
-- their fill until rewritten (VACUUM FULL receipts.messages). An operator may choose
-- another trade: ALTER TABLE receipts.messages SET (fillfactor = 80).
ALTER TABLE receipts.messages SET (fillfactor = 50);
ALTER TABLE receipts.chat_members SET (fillfactor = 70);

-- Retention deletes by age, and events arrive in about that order: a BRIN index (a few
-- pages, no per-row entry) serves it instead of a B-tree every event insert had to update.
DROP INDEX receipts.events_by_age;
CREATE INDEX events_by_age ON receipts.events USING brin (occurred_at);
COMMENT ON INDEX receipts.events_by_age IS 'Retention finds old events by occurred_at (BRIN: events are appended in about that order).';

-- Concurrent single reads, one statement -----------------------------------------------------
--
-- Most markings are one message read by one user. Under load the service gathers the ones
-- that arrive while it is busy and marks them with one call of this function: the same
-- outcome for each as receipts.mark_read(tenant, chat, user, ARRAY[message], NULL), with
-- the statements, trigger runs and commit shared. Each (chat, user) appears at most once.
--
-- Locks: the member rows first, all at once in (chat, user) order, as mark_read locks its
-- one; under them, which of these users may still read which message cannot change, so
-- the UPDATE appends exactly the readers found eligible. Another user's concurrent read of
-- the same message re-evaluates the UPDATE on the newest row version: no reader is lost.
CREATE FUNCTION receipts.mark_read_each(p_tenant text, p_chats text[], p_users text[], p_messages text[])
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

    -- Watermarks, as in mark_read, for the members who read something or had a mark.
    UPDATE receipts.chat_members AS member SET
        read_seq      = moved.new_read_seq,
        delivered_seq = greatest(member.delivered_seq, moved.new_read_seq),
        reads_above   = member.reads_above + moved.marked
                        - (receipts.recipient_seqs(p_tenant, member.chat_id, member.user_id, member.read_seq, moved.new_read_seq)
                           - receipts.own_messages(p_tenant, member.chat_id, member.user_id, member.read_seq, moved.new_read_seq)),
        marked_unread = false,
        last_read_at  = CASE WHEN moved.marked > 0 THEN now() ELSE member.last_read_at END
    FROM (
        SELECT pair.chat, pair.reader, pair.marked,
               coalesce(receipts.first_unread_seq(p_tenant, pair.chat, pair.reader, current.read_seq, chat.last_seq) - 1,
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
