-- As in 0002, reading the user's chunk row of each message (a missing row: nothing read).
CREATE OR REPLACE FUNCTION receipts.first_unread_seq(p_tenant text, p_chat text, p_user text, p_after bigint, p_through bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_chunk integer;
    v_from bigint;
    v_to bigint;
    v_seq bigint;
BEGIN
    SELECT member.receipt_chunk INTO v_chunk FROM receipts.chat_members AS member
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user;
    -- Period by period, so each scan walks the seq index in order and stops at the first hit.
    FOR v_from, v_to IN
        SELECT greatest(period.after_seq, p_after), least(coalesce(period.until_seq, p_through), p_through)
        FROM receipts.membership_periods AS period
        WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = p_user
          AND (period.until_seq IS NULL OR period.until_seq > p_after) AND period.after_seq < p_through
        ORDER BY period.after_seq
    LOOP
        SELECT message.seq INTO v_seq
        FROM receipts.messages AS message
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
          AND message.seq > v_from AND message.seq <= v_to
          AND message.sender_id <> p_user
          AND NOT EXISTS (SELECT FROM receipts.receipt_chunks AS receipt
                          WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat
                            AND receipt.seq = message.seq AND receipt.chunk = v_chunk
                            AND (p_user = ANY (receipt.read_by) OR p_user = ANY (receipt.hidden_read_by)))
        ORDER BY message.seq
        LIMIT 1;
        IF FOUND THEN
            RETURN v_seq;
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION receipts.first_unread_seq(text, text, text, bigint, bigint) IS
    'The first message in (p_after, p_through] the user still has to read, or null. Scans only what lies before it.';

CREATE OR REPLACE FUNCTION receipts.first_undelivered_seq(p_tenant text, p_chat text, p_user text, p_after bigint, p_through bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_chunk integer;
    v_from bigint;
    v_to bigint;
    v_seq bigint;
BEGIN
    SELECT member.receipt_chunk INTO v_chunk FROM receipts.chat_members AS member
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user;
    FOR v_from, v_to IN
        SELECT greatest(period.after_seq, p_after), least(coalesce(period.until_seq, p_through), p_through)
        FROM receipts.membership_periods AS period
        WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = p_user
          AND (period.until_seq IS NULL OR period.until_seq > p_after) AND period.after_seq < p_through
        ORDER BY period.after_seq
    LOOP
        SELECT message.seq INTO v_seq
        FROM receipts.messages AS message
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
          AND message.seq > v_from AND message.seq <= v_to
          AND message.sender_id <> p_user
          AND NOT EXISTS (SELECT FROM receipts.receipt_chunks AS receipt
                          WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat
                            AND receipt.seq = message.seq AND receipt.chunk = v_chunk
                            AND p_user = ANY (receipt.delivered_to))
        ORDER BY message.seq
        LIMIT 1;
        IF FOUND THEN
            RETURN v_seq;
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION receipts.first_undelivered_seq(text, text, text, bigint, bigint) IS
    'The first message in (p_after, p_through] that has not reached the user yet, or null.';

-- mark_read as in 0012: the guarded UPDATE appends to the reader's chunk row of each message.
CREATE OR REPLACE FUNCTION receipts.mark_read(p_tenant text, p_chat text, p_user text, p_message_ids text[], p_up_to text)
RETURNS TABLE (outcome text, marked integer, unread_count integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_read_seq bigint;
    v_period_after_seq bigint;
    v_chunk integer;
    v_last_seq bigint;
    v_marked_unread boolean;
    v_visible boolean;
    v_up_to_seq bigint;
    v_marked integer;
    v_search_from bigint;
    v_new_read_seq bigint;
    v_unread integer;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT member.read_seq, member.period_after_seq, member.receipt_chunk, chat.last_seq, member.marked_unread,
           coalesce((SELECT setting.read_receipts FROM receipts.users AS setting
                     WHERE setting.tenant_id = p_tenant AND setting.user_id = p_user), true)
    INTO v_read_seq, v_period_after_seq, v_chunk, v_last_seq, v_marked_unread, v_visible
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

    -- Sent while a member: at once when above the start of the newest period (the member
    -- row is locked, so no join or leave moves it meanwhile); below it, the periods are
    -- read once, by the first row that needs them. The messages' seqs are gathered first and
    -- the reader's chunk rows found by key, one probe each: no join for the planner to choose,
    -- so a generic plan made while the tables looked empty cannot turn a read-all of 10,000
    -- into a nested loop over both (it did: 15 s instead of 0.1 s).
    IF p_message_ids IS NOT NULL THEN
        UPDATE receipts.receipt_chunks AS receipt SET
            read_by        = CASE WHEN v_visible THEN array_append(receipt.read_by, p_user) ELSE receipt.read_by END,
            read_at        = CASE WHEN v_visible THEN array_append(receipt.read_at, now()) ELSE receipt.read_at END,
            hidden_read_by = CASE WHEN v_visible THEN receipt.hidden_read_by ELSE array_append(receipt.hidden_read_by, p_user) END,
            delivered_to   = CASE WHEN p_user = ANY (receipt.delivered_to) THEN receipt.delivered_to ELSE array_append(receipt.delivered_to, p_user) END,
            delivered_at   = CASE WHEN p_user = ANY (receipt.delivered_to) THEN receipt.delivered_at ELSE array_append(receipt.delivered_at, now()) END
        WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.chunk = v_chunk
          AND receipt.seq = ANY (ARRAY(
              SELECT message.seq FROM receipts.messages AS message
              WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
                AND message.message_id = ANY (p_message_ids)
                AND message.sender_id <> p_user
                AND CASE WHEN message.seq > v_period_after_seq THEN true
                         ELSE message.seq <@ (SELECT receipts.membership_seqs(p_tenant, p_chat, p_user)) END))
          AND NOT (p_user = ANY (receipt.read_by)) AND NOT (p_user = ANY (receipt.hidden_read_by));
    ELSE
        UPDATE receipts.receipt_chunks AS receipt SET
            read_by        = CASE WHEN v_visible THEN array_append(receipt.read_by, p_user) ELSE receipt.read_by END,
            read_at        = CASE WHEN v_visible THEN array_append(receipt.read_at, now()) ELSE receipt.read_at END,
            hidden_read_by = CASE WHEN v_visible THEN receipt.hidden_read_by ELSE array_append(receipt.hidden_read_by, p_user) END,
            delivered_to   = CASE WHEN p_user = ANY (receipt.delivered_to) THEN receipt.delivered_to ELSE array_append(receipt.delivered_to, p_user) END,
            delivered_at   = CASE WHEN p_user = ANY (receipt.delivered_to) THEN receipt.delivered_at ELSE array_append(receipt.delivered_at, now()) END
        WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.chunk = v_chunk
          AND receipt.seq = ANY (ARRAY(
              SELECT message.seq FROM receipts.messages AS message
              WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
                AND message.seq > v_read_seq AND message.seq <= v_up_to_seq
                AND message.sender_id <> p_user
                AND CASE WHEN message.seq > v_period_after_seq THEN true
                         ELSE message.seq <@ (SELECT receipts.membership_seqs(p_tenant, p_chat, p_user)) END))
          AND NOT (p_user = ANY (receipt.read_by)) AND NOT (p_user = ANY (receipt.hidden_read_by));
    END IF;
    GET DIAGNOSTICS v_marked = ROW_COUNT;
    IF v_marked = 0 AND NOT v_marked_unread THEN
        -- Nothing was read now, so the first unread message and the count are as they were.
        RETURN QUERY SELECT 'marked', 0, receipts.unread_count(p_tenant, p_chat, p_user);
        RETURN;
    END IF;

    -- As in 0012: the watermark moves to just below the first message still unread (after
    -- a read of a range, the search starts at its end), and reads_above drops by the
    -- messages it passes that were the reader's to read.
    SELECT chat.last_seq INTO v_last_seq
    FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat;
    v_search_from := CASE WHEN p_message_ids IS NULL THEN greatest(v_read_seq, v_up_to_seq) ELSE v_read_seq END;
    IF v_read_seq >= v_period_after_seq THEN
        SELECT message.seq - 1 INTO v_new_read_seq
        FROM receipts.messages AS message
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
          AND message.seq > v_search_from AND message.seq <= v_last_seq
          AND message.sender_id <> p_user
          AND NOT EXISTS (SELECT FROM receipts.receipt_chunks AS receipt
                          WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat
                            AND receipt.seq = message.seq AND receipt.chunk = v_chunk
                            AND (p_user = ANY (receipt.read_by) OR p_user = ANY (receipt.hidden_read_by)))
        ORDER BY message.seq
        LIMIT 1;
        v_new_read_seq := coalesce(v_new_read_seq, v_last_seq);
    ELSE
        v_new_read_seq := coalesce(receipts.first_unread_seq(p_tenant, p_chat, p_user, v_search_from, v_last_seq) - 1, v_last_seq);
    END IF;
    UPDATE receipts.chat_members AS member SET
        read_seq      = v_new_read_seq,
        delivered_seq = greatest(member.delivered_seq, v_new_read_seq),
        reads_above   = member.reads_above + v_marked
                        - CASE WHEN v_new_read_seq = v_read_seq THEN 0
                               ELSE CASE WHEN v_read_seq >= v_period_after_seq
                                         THEN v_new_read_seq - v_read_seq
                                         ELSE receipts.recipient_seqs(p_tenant, p_chat, p_user, v_read_seq, v_new_read_seq) END
                                    - (SELECT count(*) FROM receipts.messages AS own
                                       WHERE own.tenant_id = p_tenant AND own.chat_id = p_chat AND own.sender_id = p_user
                                         AND own.seq > v_read_seq AND own.seq <= v_new_read_seq) END,
        marked_unread = false,
        last_read_at  = CASE WHEN v_marked > 0 THEN now() ELSE member.last_read_at END
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
    RETURNING receipts.unread_of(member, v_last_seq) INTO v_unread;
    RETURN QUERY SELECT 'marked', v_marked, v_unread;
END;
$$;
COMMENT ON FUNCTION receipts.mark_read(text, text, text, text[], text) IS
    'Marks messages read by a user (ids, or up to a message, or all when both are null): marked | not_member | message_not_found | chat_not_found, with how many changed and the new unread count.';

-- mark_read_each as in 0014: requests are grouped by the chunk row they append to (readers of
-- one message in one chunk share it) instead of by message.
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
        SELECT request.position, message.chat_id, message.seq, member.receipt_chunk AS chunk, request.reader,
               coalesce(setting.read_receipts, true) AS visible,
               NOT (request.reader = ANY (receipt.delivered_to)) AS undelivered
        FROM request
        JOIN receipts.chat_members AS member
            ON member.tenant_id = p_tenant AND member.chat_id = request.chat AND member.user_id = request.reader
           AND member.left_at IS NULL
        JOIN receipts.messages AS message
            ON message.tenant_id = p_tenant AND message.chat_id = request.chat AND message.message_id = request.message
        JOIN receipts.receipt_chunks AS receipt
            ON receipt.tenant_id = p_tenant AND receipt.chat_id = request.chat AND receipt.seq = message.seq
           AND receipt.chunk = member.receipt_chunk
        LEFT JOIN receipts.users AS setting ON setting.tenant_id = p_tenant AND setting.user_id = request.reader
        WHERE message.sender_id <> request.reader
          AND NOT (request.reader = ANY (receipt.read_by)) AND NOT (request.reader = ANY (receipt.hidden_read_by))
          -- Sent while a member: at once when above the start of their newest period.
          AND CASE WHEN message.seq > member.period_after_seq THEN true
                   ELSE message.seq <@ receipts.membership_seqs(p_tenant, request.chat, request.reader) END
    ),
    per_chunk AS (
        SELECT chat_id, seq, chunk,
               coalesce(array_agg(reader ORDER BY position) FILTER (WHERE visible), '{}') AS visible_readers,
               coalesce(array_agg(reader ORDER BY position) FILTER (WHERE NOT visible), '{}') AS hidden_readers,
               coalesce(array_agg(reader ORDER BY position) FILTER (WHERE undelivered), '{}') AS receivers,
               array_agg(reader) AS readers
        FROM eligible GROUP BY chat_id, seq, chunk
        ORDER BY chat_id, seq, chunk  -- rows are locked in this order, the same in every call
    ),
    updated AS (
        UPDATE receipts.receipt_chunks AS receipt SET
            read_by        = receipt.read_by || per_chunk.visible_readers,
            read_at        = receipt.read_at || array_fill(now(), ARRAY[cardinality(per_chunk.visible_readers)]),
            hidden_read_by = receipt.hidden_read_by || per_chunk.hidden_readers,
            delivered_to   = receipt.delivered_to || per_chunk.receivers,
            delivered_at   = receipt.delivered_at || array_fill(now(), ARRAY[cardinality(per_chunk.receivers)])
        FROM per_chunk
        WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = per_chunk.chat_id
          AND receipt.seq = per_chunk.seq AND receipt.chunk = per_chunk.chunk
          -- The guard: none of these readers is on the row already.
          AND NOT (receipt.read_by && per_chunk.readers) AND NOT (receipt.hidden_read_by && per_chunk.readers)
          AND NOT (receipt.delivered_to && per_chunk.receivers)
        RETURNING receipt.chat_id, receipt.seq, receipt.chunk
    )
    SELECT array_agg(CASE WHEN updated.seq IS NULL THEN 0 ELSE 1 END ORDER BY request.position)
    INTO v_marked
    FROM request
    LEFT JOIN eligible ON eligible.position = request.position
    LEFT JOIN updated ON updated.chat_id = eligible.chat_id AND updated.seq = eligible.seq AND updated.chunk = eligible.chunk;

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
                                     AND NOT EXISTS (SELECT FROM receipts.receipt_chunks AS receipt
                                                     WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = pair.chat
                                                       AND receipt.seq = message.seq AND receipt.chunk = current.receipt_chunk
                                                       AND (pair.reader = ANY (receipt.read_by) OR pair.reader = ANY (receipt.hidden_read_by)))
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
COMMENT ON FUNCTION receipts.mark_read_each(text, text[], text[], text[]) IS
    'Marks one message read for each (chat, user, message) of the arrays, as many receipts.mark_read calls would, in one statement: one row per request, in order.';

-- mark_delivered as in 0002, appending to the user's chunk rows.
CREATE OR REPLACE FUNCTION receipts.mark_delivered(p_tenant text, p_chat text, p_user text, p_message_ids text[], p_up_to text)
RETURNS TABLE (outcome text, marked integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_last_seq bigint;
    v_from_seq bigint;
    v_left_at timestamptz;
    v_chunk integer;
    v_up_to_seq bigint;
    v_marked integer;
    v_recipient_of int8multirange;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT chat.last_seq INTO v_last_seq FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'chat_not_found', 0;
        RETURN;
    END IF;
    SELECT greatest(member.delivered_seq, member.read_seq), member.left_at, member.receipt_chunk,
           receipts.membership_seqs(p_tenant, p_chat, p_user)
    INTO v_from_seq, v_left_at, v_chunk, v_recipient_of
    FROM receipts.chat_members AS member
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
    FOR UPDATE;
    IF NOT FOUND OR v_left_at IS NOT NULL THEN
        RETURN QUERY SELECT 'not_member', 0;
        RETURN;
    END IF;
    IF p_up_to IS NOT NULL THEN
        SELECT message.seq INTO v_up_to_seq FROM receipts.messages AS message
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat AND message.message_id = p_up_to;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'message_not_found', 0;
            RETURN;
        END IF;
    ELSE
        v_up_to_seq := v_last_seq;
    END IF;

    IF p_message_ids IS NOT NULL THEN
        UPDATE receipts.receipt_chunks AS receipt SET
            delivered_to = array_append(receipt.delivered_to, p_user),
            delivered_at = array_append(receipt.delivered_at, now())
        WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.chunk = v_chunk
          AND receipt.seq = ANY (ARRAY(
              SELECT message.seq FROM receipts.messages AS message
              WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
                AND message.message_id = ANY (p_message_ids)
                AND message.sender_id <> p_user
                AND message.seq <@ v_recipient_of))
          AND NOT (p_user = ANY (receipt.delivered_to));
    ELSE
        UPDATE receipts.receipt_chunks AS receipt SET
            delivered_to = array_append(receipt.delivered_to, p_user),
            delivered_at = array_append(receipt.delivered_at, now())
        WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.chunk = v_chunk
          AND receipt.seq = ANY (ARRAY(
              SELECT message.seq FROM receipts.messages AS message
              WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
                AND message.seq > v_from_seq AND message.seq <= v_up_to_seq
                AND message.sender_id <> p_user
                AND message.seq <@ v_recipient_of))
          AND NOT (p_user = ANY (receipt.delivered_to));
    END IF;
    GET DIAGNOSTICS v_marked = ROW_COUNT;
    IF v_marked > 0 THEN
        SELECT chat.last_seq INTO v_last_seq FROM receipts.chats AS chat
        WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat;
        UPDATE receipts.chat_members AS member
        SET delivered_seq = coalesce(receipts.first_undelivered_seq(p_tenant, p_chat, p_user, v_from_seq, v_last_seq) - 1, v_last_seq)
        WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user;
    END IF;
    RETURN QUERY SELECT 'marked', v_marked;
END;
$$;
COMMENT ON FUNCTION receipts.mark_delivered(text, text, text, text[], text) IS
    'Marks messages delivered to a user (ids, or up to a message, or all): marked | not_member | message_not_found | chat_not_found.';

CREATE OR REPLACE FUNCTION receipts.mark_unread(p_tenant text, p_chat text, p_user text)
RETURNS TABLE (outcome text, unread_count integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    IF NOT EXISTS (SELECT FROM receipts.chats AS chat WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat) THEN
        RETURN QUERY SELECT 'chat_not_found', 0;
        RETURN;
    END IF;
    UPDATE receipts.chat_members AS member SET marked_unread = true
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
      AND member.left_at IS NULL;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_member', 0;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'marked', receipts.unread_count(p_tenant, p_chat, p_user);
END;
$$;
COMMENT ON FUNCTION receipts.mark_unread(text, text, text) IS
    'Marks a chat unread for one user (their count is at least 1 until they read): marked | not_member | chat_not_found.';
