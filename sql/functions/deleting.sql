-- Deleting a message or a chat (docs/api.md, "Deleting, erasing and credentials").
--
-- Counts stay arithmetic (sql/views/unread.sql): a member's count is the seqs above their
-- watermark sent while a member, less their own messages there, less reads_above. A deleted
-- message's seq stays in that range, so for each member whose count included it (above
-- their watermark, sent while a member, not read by them; for its sender: their own message,
-- which the view no longer finds once it is gone) reads_above grows by one, as if they had
-- read it. When their watermark later passes that seq, the marking subtracts it as one of
-- the seqs it passed that is not their own: the two cancel, as for any read out of order.
--
-- Locks: the chat row first (as sends, joins and leaves take it: none of them runs
-- meanwhile), then the member rows the delete changes, in user order (as the marking
-- function takes them: a concurrent read of the message either finished before, and is
-- counted as read, or waits and then finds the message gone).

-- jit off: the unread trigger this function's UPDATE of member rows fires plans its join with
-- nested loops off, at a cost that would have PostgreSQL compile it on every call (0.6 s);
-- every statement here is a few index lookups.
CREATE OR REPLACE FUNCTION receipts.delete_message(p_tenant text, p_chat text, p_message text, p_sender text)
RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_seq bigint;
    v_sender text;
    v_audience text[];
    v_users text[];
    v_before integer[];
    v_current boolean[];
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    PERFORM FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'chat_not_found';
    END IF;
    SELECT message.seq, message.sender_id INTO v_seq, v_sender FROM receipts.messages AS message
    WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat AND message.message_id = p_message;
    IF NOT FOUND THEN
        IF EXISTS (SELECT FROM receipts.deleted_messages AS deleted
                   WHERE deleted.tenant_id = p_tenant AND deleted.chat_id = p_chat AND deleted.message_id = p_message) THEN
            RETURN 'already_deleted';
        END IF;
        RETURN 'message_not_found';
    END IF;
    IF p_sender IS NOT NULL AND p_sender <> v_sender THEN
        RETURN 'not_sender';
    END IF;
    v_audience := receipts.chat_audience(p_tenant, p_chat);

    -- The member rows that may change, locked first (a read of theirs under way finishes
    -- before); then, in a statement that sees what such reads committed, those whose count
    -- included the message, with their counts before.
    PERFORM FROM receipts.chat_members AS member
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.read_seq < v_seq
    ORDER BY member.user_id
    FOR UPDATE;
    SELECT coalesce(array_agg(locked.user_id ORDER BY locked.user_id), '{}'),
           coalesce(array_agg(locked.unread_count ORDER BY locked.user_id), '{}'),
           coalesce(array_agg(locked.current ORDER BY locked.user_id), '{}')
    INTO v_users, v_before, v_current
    FROM (
        SELECT member.user_id::text AS user_id, unread.unread_count, member.left_at IS NULL AS current
        FROM receipts.chat_members AS member
        JOIN receipts.member_unread AS unread
            ON unread.tenant_id = member.tenant_id AND unread.chat_id = member.chat_id AND unread.user_id = member.user_id
        WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.read_seq < v_seq
          AND v_seq <@ receipts.membership_seqs(p_tenant, p_chat, member.user_id)
          AND NOT EXISTS (SELECT FROM receipts.receipt_chunks AS receipt
                          WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.seq = v_seq
                            AND receipt.chunk = member.receipt_chunk
                            AND (member.user_id = ANY (receipt.read_by) OR member.user_id = ANY (receipt.hidden_read_by)))
    ) AS locked;

    DELETE FROM receipts.receipt_chunks AS receipt
    WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.seq = v_seq;
    DELETE FROM receipts.messages AS message
    WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat AND message.message_id = p_message;
    INSERT INTO receipts.deleted_messages (tenant_id, chat_id, message_id) VALUES (p_tenant, p_chat, p_message);
    UPDATE receipts.chat_members AS member SET reads_above = member.reads_above + 1
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = ANY (v_users);

    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, audience)
    VALUES (p_tenant, nextval('receipts.event_ids'), pg_current_xact_id(), 'message.deleted', p_chat, v_sender,
            ARRAY[p_message], v_audience);
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, data, audience)
    SELECT p_tenant, nextval('receipts.event_ids'), pg_current_xact_id(), 'unread.changed', p_chat, changed.user_id,
           jsonb_build_object('unreadCount', changed.unread_count, 'markedUnread', changed.marked_unread),
           ARRAY[changed.user_id]
    FROM (
        SELECT affected.user_id, unread.unread_count, unread.marked_unread
        FROM unnest(v_users, v_before, v_current) AS affected(user_id, before, current)
        JOIN receipts.member_unread AS unread
            ON unread.tenant_id = p_tenant AND unread.chat_id = p_chat AND unread.user_id = affected.user_id
        WHERE affected.current AND unread.unread_count <> affected.before
        ORDER BY affected.user_id
    ) AS changed;
    PERFORM receipts.wake_listeners();
    RETURN 'deleted';
END;
$$;
COMMENT ON FUNCTION receipts.delete_message(text, text, text, text) IS
    'Deletes a message (p_sender: only if they sent it; null: whoever did): deleted | already_deleted | message_not_found | not_sender | chat_not_found. Counts drop at once; message.deleted and unread.changed events.';

-- Concurrent deletes of a tenant in one transaction. A delete alone costs little work in
-- PostgreSQL but a whole transaction: its commit and WAL flush weigh more than its
-- statements. Under load the service gathers the deletes that arrive while it is busy
-- (ReceiptsStore.deletes, a TenantBatcher, one request per chat at a time) and makes them one
-- call of this function: each request gets the outcome, the events and the count changes
-- receipts.delete_message gives it alone, and the commit is shared. p_senders holds null
-- where the request may delete whoever's message (the tenant key).
--
-- Locks: the chat rows first, all at once in chat order (as sends and erasures take them);
-- then the requests, one after another in chat order, each taking its chat's member rows as
-- delete_message does. So member rows are taken in (chat, user) order across the batch, as the
-- marking function takes them: no lock is ever waited for out of order.
CREATE OR REPLACE FUNCTION receipts.delete_message_each(p_tenant text, p_chats text[], p_messages text[], p_senders text[])
RETURNS TABLE (request integer, outcome text)
LANGUAGE plpgsql SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_item record;
    v_outcomes text[];
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    IF cardinality(p_chats) <> cardinality(p_messages) OR cardinality(p_chats) <> cardinality(p_senders) THEN
        RAISE EXCEPTION 'receipts.delete_message_each: % chats, % messages, % senders',
            cardinality(p_chats), cardinality(p_messages), cardinality(p_senders);
    END IF;
    v_outcomes := array_fill(NULL::text, ARRAY[cardinality(p_chats)]);
    PERFORM FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = ANY (p_chats)
    ORDER BY chat.chat_id
    FOR UPDATE;
    FOR v_item IN
        SELECT item.position::integer AS position, item.chat, item.message, item.sender
        FROM unnest(p_chats, p_messages, p_senders) WITH ORDINALITY AS item(chat, message, sender, position)
        ORDER BY item.chat COLLATE "C", item.position
    LOOP
        v_outcomes[v_item.position] := receipts.delete_message(p_tenant, v_item.chat, v_item.message, v_item.sender);
    END LOOP;
    RETURN QUERY
    SELECT done.position::integer, done.outcome
    FROM unnest(v_outcomes) WITH ORDINALITY AS done(outcome, position)
    ORDER BY done.position;
END;
$$;
COMMENT ON FUNCTION receipts.delete_message_each(text, text[], text[], text[]) IS
    'Deletes one message per request, as many receipts.delete_message calls would, in one transaction: one row per request, in order.';

-- The chat row and its members go at once (counts, lists, rosters), with events to the
-- members it had; its messages and receipts are left to receipts.purge_deleted_chat_batch.
CREATE OR REPLACE FUNCTION receipts.delete_chat(p_tenant text, p_chat text)
RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_last_seq bigint;
    v_audience text[];
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT chat.last_seq INTO v_last_seq FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'chat_not_found';
    END IF;
    v_audience := receipts.chat_audience(p_tenant, p_chat);
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, audience)
    VALUES (p_tenant, nextval('receipts.event_ids'), pg_current_xact_id(), 'chat.deleted', p_chat, NULL, v_audience);
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, data, audience)
    SELECT p_tenant, nextval('receipts.event_ids'), pg_current_xact_id(), 'unread.changed', p_chat, unread.user_id,
           jsonb_build_object('unreadCount', 0, 'markedUnread', false), ARRAY[unread.user_id::text]
    FROM receipts.member_unread AS unread
    WHERE unread.tenant_id = p_tenant AND unread.chat_id = p_chat AND unread.left_at IS NULL
      AND (unread.unread_count > 0 OR unread.marked_unread)
    ORDER BY unread.user_id;
    IF v_last_seq > 0 THEN
        INSERT INTO receipts.chat_purges AS purge (tenant_id, chat_id) VALUES (p_tenant, p_chat)
        ON CONFLICT (tenant_id, chat_id) DO UPDATE SET requested_at = now();
    END IF;
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
