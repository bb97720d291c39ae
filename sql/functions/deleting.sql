-- Deleting a message or a chat (docs/api.md, "Deleting, erasing and credentials").
--
-- Counts stay arithmetic (sql/views/unread.sql): a member's count is the seqs above their
-- watermark sent while a member, less their own messages there, less reads_above. A deleted
-- message's seq stays in that range, so for each member whose count included it (above
-- their watermark, sent while a member, not read by them; for its sender: their own message,
-- which the view no longer finds once it is gone) reads_above grows by one, as if they had
-- read it. When their watermark later passes that seq, the marking subtracts it as one of
-- the seqs it passed that is not their own: the two cancel, as for any read out of order.

-- Deletes, for any number of requests in one statement, one message per chat:
-- deleted | already_deleted | message_not_found | not_sender | chat_not_found. p_senders
-- holds null where the request may delete whoever's message (the tenant key).
-- receipts.delete_message is one request of it, for psql.
--
-- Threads: deleting a root deletes its replies with it (each as a deleted message: counts,
-- tombstones, and one message.deleted naming them all); deleting a reply takes it out of its
-- root's summary (receipts.threads).
--
-- A delete alone is a dozen small statements and a commit; under load the service gathers
-- the deletes that arrive while it is busy (ReceiptsStore.deletes, a TenantBatcher) and
-- makes them one call of this function: each request gets the outcome, rows, counts and
-- events it would get alone, with each statement, each trigger run and the commit shared by
-- the batch. Each chat appears at most once (the batcher keys deletes by chat), so the
-- requests never touch the same rows and each can be judged and done as if alone.
--
-- Locks: the chat rows first, all at once in chat order (as sends, joins, leaves and
-- erasures take them: none of them runs meanwhile); then the member rows the deletes change,
-- all at once in (chat, user) order (as the marking function takes them): a read of the
-- message under way finishes first, and the statements after see it (it is counted as read);
-- a read that comes after finds the message gone.
--
-- Plans: index lookups per request, as for the sends and reads batched alike (see
-- receipts.mark_read_each): nested loops only, planned once per session. jit off: the unread
-- trigger that the UPDATE of member rows fires plans its join with nested loops off, at a
-- cost that would have PostgreSQL compile it on every call (0.6 s); every statement here is
-- a few index lookups.
CREATE OR REPLACE FUNCTION receipts.delete_message_each(p_tenant text, p_chats text[], p_messages text[], p_senders text[])
RETURNS TABLE (request integer, outcome text)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_outcomes text[];
    -- The messages asked for, one per chat: chat, id, seq, sender, the root of a reply.
    v_chats text[];
    v_messages text[];
    v_seqs bigint[];
    v_senders text[];
    v_roots text[];
    -- Those and the replies of roots among them: chat, id, seq.
    v_doomed_chats text[];
    v_doomed_messages text[];
    v_doomed_seqs bigint[];
    -- The members whose count included some of them: chat, user, count before, still a
    -- member, how many.
    v_member_chats text[];
    v_members text[];
    v_before integer[];
    v_current boolean[];
    v_counted integer[];
BEGIN
    PERFORM receipts.begin_batch('receipts.delete_message_each', p_tenant, ARRAY['chats', 'messages', 'senders'],
                                 ARRAY[cardinality(p_chats), cardinality(p_messages), cardinality(p_senders)],
                                 p_chats);

    SELECT array_agg(judged.outcome ORDER BY judged.position),
           coalesce(array_agg(judged.chat ORDER BY judged.chat) FILTER (WHERE judged.outcome = 'deleted'), '{}'),
           coalesce(array_agg(judged.message ORDER BY judged.chat) FILTER (WHERE judged.outcome = 'deleted'), '{}'),
           coalesce(array_agg(judged.seq ORDER BY judged.chat) FILTER (WHERE judged.outcome = 'deleted'), '{}'),
           coalesce(array_agg(judged.sender_id ORDER BY judged.chat) FILTER (WHERE judged.outcome = 'deleted'), '{}'),
           coalesce(array_agg(judged.thread_id ORDER BY judged.chat) FILTER (WHERE judged.outcome = 'deleted'), '{}')
    INTO v_outcomes, v_chats, v_messages, v_seqs, v_senders, v_roots
    FROM (
        SELECT item.position, item.chat COLLATE "C" AS chat, item.message, found.seq, found.sender_id::text AS sender_id,
               found.thread_id::text AS thread_id,
               CASE WHEN NOT EXISTS (SELECT FROM receipts.chats AS chat
                                     WHERE chat.tenant_id = p_tenant AND chat.chat_id = item.chat) THEN 'chat_not_found'
                    WHEN found.seq IS NULL AND EXISTS (SELECT FROM receipts.deleted_messages AS deleted
                                                       WHERE deleted.tenant_id = p_tenant AND deleted.chat_id = item.chat
                                                         AND deleted.message_id = item.message) THEN 'already_deleted'
                    WHEN found.seq IS NULL THEN 'message_not_found'
                    WHEN item.sender IS NOT NULL AND item.sender <> found.sender_id THEN 'not_sender'
                    ELSE 'deleted' END AS outcome
        FROM unnest(p_chats, p_messages, p_senders) WITH ORDINALITY AS item(chat, message, sender, position)
        LEFT JOIN LATERAL receipts.message_by_id(p_tenant, item.chat, item.message) AS found ON true
    ) AS judged;

    IF cardinality(v_chats) > 0 THEN
        -- With the replies of the roots among them (a reply has none).
        SELECT array_agg(doomed.chat ORDER BY doomed.chat, doomed.seq), array_agg(doomed.message ORDER BY doomed.chat, doomed.seq),
               array_agg(doomed.seq ORDER BY doomed.chat, doomed.seq)
        INTO v_doomed_chats, v_doomed_messages, v_doomed_seqs
        FROM (
            SELECT asked.chat, asked.message, asked.seq FROM unnest(v_chats, v_messages, v_seqs) AS asked(chat, message, seq)
            UNION ALL
            SELECT asked.chat, reply.message_id::text, reply.seq
            FROM unnest(v_chats, v_messages, v_roots) AS asked(chat, message, root)
            JOIN receipts.messages AS reply
                ON reply.tenant_id = p_tenant AND reply.chat_id = asked.chat AND reply.thread_id = asked.message
            WHERE asked.root IS NULL
        ) AS doomed;
        -- The member rows that may change, locked first; then, in a statement that sees what
        -- reads finished meanwhile committed, those whose count included the message (above
        -- their watermark, sent while a member, not read by them), with their counts before.
        PERFORM FROM unnest(v_chats, v_seqs) AS doomed(chat, seq)
        JOIN receipts.chat_members AS member
            ON member.tenant_id = p_tenant AND member.chat_id = doomed.chat AND member.read_seq < doomed.seq
        ORDER BY member.chat_id, member.user_id
        FOR UPDATE OF member;
        SELECT coalesce(array_agg(affected.chat ORDER BY affected.chat, affected.member), '{}'),
               coalesce(array_agg(affected.member ORDER BY affected.chat, affected.member), '{}'),
               coalesce(array_agg(affected.unread_count ORDER BY affected.chat, affected.member), '{}'),
               coalesce(array_agg(affected.current ORDER BY affected.chat, affected.member), '{}'),
               coalesce(array_agg(affected.counted ORDER BY affected.chat, affected.member), '{}')
        INTO v_member_chats, v_members, v_before, v_current, v_counted
        FROM (
            SELECT member.chat_id::text AS chat, member.user_id::text AS member, min(unread.unread_count) AS unread_count,
                   bool_and(member.left_at IS NULL) AS current, count(*)::integer AS counted
            FROM unnest(v_doomed_chats, v_doomed_seqs) AS doomed(chat, seq)
            JOIN receipts.chat_members AS member
                ON member.tenant_id = p_tenant AND member.chat_id = doomed.chat AND member.read_seq < doomed.seq
            JOIN receipts.member_unread AS unread
                ON unread.tenant_id = member.tenant_id AND unread.chat_id = member.chat_id AND unread.user_id = member.user_id
            WHERE EXISTS (SELECT FROM receipts.membership_periods AS period
                          WHERE period.tenant_id = p_tenant AND period.chat_id = doomed.chat AND period.user_id = member.user_id
                            AND doomed.seq > period.after_seq AND (period.until_seq IS NULL OR doomed.seq <= period.until_seq))
              AND NOT EXISTS (SELECT FROM receipts.receipt_chunks AS receipt
                              WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = doomed.chat AND receipt.seq = doomed.seq
                                AND receipt.chunk = member.receipt_chunk
                                AND receipts.has_read(member.user_id, receipt.read_by, receipt.hidden_read_by))
            GROUP BY member.chat_id, member.user_id
        ) AS affected;

        DELETE FROM receipts.receipt_chunks AS receipt
        USING unnest(v_doomed_chats, v_doomed_seqs) AS doomed(chat, seq)
        WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = doomed.chat AND receipt.seq = doomed.seq;
        DELETE FROM receipts.messages AS message
        USING unnest(v_doomed_chats, v_doomed_seqs) AS doomed(chat, seq)
        WHERE message.tenant_id = p_tenant AND message.chat_id = doomed.chat AND message.seq = doomed.seq;
        INSERT INTO receipts.deleted_messages (tenant_id, chat_id, message_id)
        SELECT p_tenant, doomed.chat, doomed.message FROM unnest(v_doomed_chats, v_doomed_messages) AS doomed(chat, message);
        UPDATE receipts.chat_members AS member SET reads_above = member.reads_above + affected.counted
        FROM unnest(v_member_chats, v_members, v_counted) AS affected(chat, member, counted)
        WHERE member.tenant_id = p_tenant AND member.chat_id = affected.chat AND member.user_id = affected.member;
        -- A deleted reply leaves its root's summary: one reply fewer, and the time of the
        -- newest left (messages_by_thread, from the top).
        UPDATE receipts.threads AS thread SET
            replies = thread.replies - 1,
            last_reply_at = coalesce((SELECT reply.created_at FROM receipts.messages AS reply
                                      WHERE reply.tenant_id = p_tenant AND reply.chat_id = gone.chat AND reply.thread_id = gone.root
                                      ORDER BY reply.seq DESC LIMIT 1), thread.last_reply_at)
        FROM unnest(v_chats, v_roots) AS gone(chat, root)
        CROSS JOIN LATERAL receipts.message_by_id(p_tenant, gone.chat, gone.root) AS root
        WHERE gone.root IS NOT NULL
          AND thread.tenant_id = p_tenant AND thread.chat_id = gone.chat AND thread.root_seq = root.seq;

        -- Per chat, message.deleted to its members, then unread.changed to each current
        -- member whose count it changed, with the new count.
        INSERT INTO receipts.events
            (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, data, audience, audience_version)
        SELECT p_tenant, nextval('receipts.event_ids'), pg_current_xact_id(), event.type, event.chat, event.user_id,
               event.message_ids, event.data, event.audience, event.audience_version
        FROM (
            SELECT doomed.chat, 0 AS rank, 'message.deleted' AS type, doomed.sender AS user_id,
                   -- The message and, for a root, its replies, in order.
                   ARRAY(SELECT gone.message
                         FROM unnest(v_doomed_chats, v_doomed_messages) WITH ORDINALITY AS gone(chat, message, position)
                         WHERE gone.chat = doomed.chat ORDER BY gone.position) AS message_ids,
                   '{}'::jsonb AS data, NULL::text[] AS audience,
                   (SELECT chat.audience_version FROM receipts.chats AS chat
                    WHERE chat.tenant_id = p_tenant AND chat.chat_id = doomed.chat) AS audience_version
            FROM unnest(v_chats, v_messages, v_senders) AS doomed(chat, message, sender)
            UNION ALL
            SELECT affected.chat, 1, 'unread.changed', affected.member, '{}',
                   jsonb_build_object('unreadCount', unread.unread_count, 'mentions', unread.unread_mentions,
                                      'markedUnread', unread.marked_unread),
                   ARRAY[affected.member], NULL
            FROM unnest(v_member_chats, v_members, v_before, v_current) AS affected(chat, member, before, current)
            JOIN receipts.member_unread AS unread
                ON unread.tenant_id = p_tenant AND unread.chat_id = affected.chat AND unread.user_id = affected.member
            WHERE affected.current AND unread.unread_count <> affected.before
            ORDER BY chat, rank, user_id
        ) AS event;
        PERFORM receipts.wake_listeners();
    END IF;

    RETURN QUERY
    SELECT done.position::integer, done.outcome
    FROM unnest(v_outcomes) WITH ORDINALITY AS done(outcome, position)
    ORDER BY done.position;
END;
$$;
COMMENT ON FUNCTION receipts.delete_message_each(text, text[], text[], text[]) IS
    'Deletes one message per request (each chat once; a null sender: whoever sent it), in one statement: one row per request, in order, with deleted | already_deleted | message_not_found | not_sender | chat_not_found. Counts drop at once; message.deleted and unread.changed events.';

-- One request of receipts.delete_message_each.
CREATE OR REPLACE FUNCTION receipts.delete_message(p_tenant text, p_chat text, p_message text, p_sender text)
RETURNS text
LANGUAGE sql AS $$
    SELECT deleted.outcome
    FROM receipts.delete_message_each(p_tenant, ARRAY[p_chat], ARRAY[p_message], ARRAY[p_sender]) AS deleted;
$$;
COMMENT ON FUNCTION receipts.delete_message(text, text, text, text) IS
    'Deletes a message (p_sender: only if they sent it; null: whoever did): deleted | already_deleted | message_not_found | not_sender | chat_not_found. Counts drop at once; message.deleted and unread.changed events.';

-- The chat row and its members go at once (counts, lists, rosters), with events to the
-- members it had; its messages and receipts are left to receipts.purge_deleted_chat_batch.
CREATE OR REPLACE FUNCTION receipts.delete_chat(p_tenant text, p_chat text)
RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_last_seq bigint;
    v_version integer;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT chat.last_seq, chat.audience_version INTO v_last_seq, v_version FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'chat_not_found';
    END IF;
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, audience_version)
    VALUES (p_tenant, nextval('receipts.event_ids'), pg_current_xact_id(), 'chat.deleted', p_chat, NULL, v_version);
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, data, audience)
    SELECT p_tenant, nextval('receipts.event_ids'), pg_current_xact_id(), 'unread.changed', p_chat, unread.user_id,
           jsonb_build_object('unreadCount', 0, 'mentions', 0, 'markedUnread', false), ARRAY[unread.user_id::text]
    FROM receipts.member_unread AS unread
    WHERE unread.tenant_id = p_tenant AND unread.chat_id = p_chat AND unread.left_at IS NULL
      AND (unread.unread_count > 0 OR unread.marked_unread)
    ORDER BY unread.user_id;
    IF v_last_seq > 0 THEN
        INSERT INTO receipts.chat_purges AS purge (tenant_id, chat_id) VALUES (p_tenant, p_chat)
        ON CONFLICT (tenant_id, chat_id) DO UPDATE SET requested_at = now();
    END IF;
    -- Its members' audience periods end with it (the next chat of this id goes on from the
    -- version after), and stay for the events of this one that the log keeps.
    UPDATE receipts.audience_periods AS period SET until_version = v_version + 1, left_at = now()
    WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.until_version IS NULL;
    DELETE FROM receipts.chats AS chat WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat;
    PERFORM receipts.wake_listeners();
    RETURN 'deleted';
END;
$$;
COMMENT ON FUNCTION receipts.delete_chat(text, text) IS
    'Deletes a chat with its members at once (its messages go in the background): deleted | chat_not_found. chat.deleted and unread.changed events.';

-- Removes what is left of a deleted chat's messages, up to p_limit of them (newest first),
-- and the purge row once none is left. Returns how many it removed. The caller holds the
-- purge row locked (FOR UPDATE): one remover at a time per chat, across instances.
CREATE OR REPLACE FUNCTION receipts.purge_chat_messages(p_tenant text, p_chat text, p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_from bigint;
    v_removed integer;
BEGIN
    SELECT min(doomed.seq) INTO v_from FROM (
        SELECT message.seq FROM receipts.messages AS message
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
        ORDER BY message.seq DESC LIMIT p_limit) AS doomed;
    IF v_from IS NULL THEN
        DELETE FROM receipts.chat_purges AS purge WHERE purge.tenant_id = p_tenant AND purge.chat_id = p_chat;
        RETURN 0;
    END IF;
    DELETE FROM receipts.receipt_chunks AS receipt
    WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.seq >= v_from;
    DELETE FROM receipts.messages AS message
    WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat AND message.seq >= v_from;
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    RETURN v_removed;
END;
$$;
COMMENT ON FUNCTION receipts.purge_chat_messages(text, text, integer) IS
    'Removes up to p_limit messages (and their receipts) of a deleted chat; drops its purge row when none is left. Caller holds the purge row.';

-- One batch of the background purge, for the service's worker: any tenant's deleted chat
-- whose purge row no other session holds (SKIP LOCKED: several instances share the work,
-- never the same chat at once). As the owner, beyond row-level security, to find the chat;
-- the batch itself runs scoped to its tenant. Returns the chat's tenant and how many
-- messages it removed (no row: nothing to purge).
CREATE OR REPLACE FUNCTION receipts.purge_deleted_chat_batch(p_limit integer)
RETURNS TABLE (tenant_id text, chat_id text, removed integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_tenant text;
    v_chat text;
BEGIN
    SELECT purge.tenant_id, purge.chat_id INTO v_tenant, v_chat FROM receipts.chat_purges AS purge
    ORDER BY purge.requested_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM set_config('receipts.tenant_id', v_tenant, true);
    RETURN QUERY SELECT v_tenant, v_chat, receipts.purge_chat_messages(v_tenant, v_chat, p_limit);
END;
$$;
COMMENT ON FUNCTION receipts.purge_deleted_chat_batch(integer) IS
    'Background purge: removes up to p_limit messages of one deleted chat (any tenant) that no other session is purging.';
REVOKE ALL ON FUNCTION receipts.purge_deleted_chat_batch(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.purge_deleted_chat_batch(integer) TO receipts_service;
