-- Sending messages.

CREATE OR REPLACE FUNCTION receipts.send_message(p_tenant text, p_chat text, p_message text, p_sender text, p_body text)
RETURNS TABLE (outcome text, seq bigint, created_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_existing_sender text;
    v_existing_body text;
    v_existing_seq bigint;
    v_existing_created_at timestamptz;
    v_is_member boolean;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    -- The chat row lock serialises sends (and joins, leaves) of one chat: seq is gap-free,
    -- and a repeated id is seen by the second of two concurrent sends (the next statement
    -- runs after the lock is granted, so it sees the first send's message).
    PERFORM FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'chat_not_found', NULL::bigint, NULL::timestamptz;
        RETURN;
    END IF;
    SELECT existing.sender_id, existing.body, existing.seq, existing.created_at,
           EXISTS (SELECT FROM receipts.chat_members AS member
                   WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_sender
                     AND member.left_at IS NULL)
    INTO v_existing_sender, v_existing_body, v_existing_seq, v_existing_created_at, v_is_member
    FROM (SELECT) AS one
    LEFT JOIN receipts.messages AS existing
        ON existing.tenant_id = p_tenant AND existing.chat_id = p_chat AND existing.message_id = p_message;
    IF v_existing_seq IS NOT NULL THEN
        IF v_existing_sender = p_sender AND v_existing_body = p_body THEN
            RETURN QUERY SELECT 'existing', v_existing_seq, v_existing_created_at;
        ELSE
            RETURN QUERY SELECT 'conflict', v_existing_seq, v_existing_created_at;
        END IF;
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM receipts.deleted_messages AS deleted
               WHERE deleted.tenant_id = p_tenant AND deleted.chat_id = p_chat AND deleted.message_id = p_message) THEN
        -- A deleted message's id stays taken.
        RETURN QUERY SELECT 'conflict', NULL::bigint, NULL::timestamptz;
        RETURN;
    END IF;
    IF NOT v_is_member THEN
        RETURN QUERY SELECT 'not_member', NULL::bigint, NULL::timestamptz;
        RETURN;
    END IF;
    RETURN QUERY
    WITH next AS (
        UPDATE receipts.chats AS chat SET last_seq = chat.last_seq + 1
        WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat
        RETURNING chat.last_seq
    )
    INSERT INTO receipts.messages AS message (tenant_id, chat_id, message_id, seq, sender_id, body)
    SELECT p_tenant, p_chat, p_message, next.last_seq, p_sender, p_body FROM next
    RETURNING 'created'::text, message.seq, message.created_at;
END;
$$;
COMMENT ON FUNCTION receipts.send_message(text, text, text, text, text) IS
    'Sends a message: created | existing (same id, same sender and text) | conflict (same id, other content) | not_member | chat_not_found.';

-- Concurrent sends of a tenant in one statement.
--
-- A send costs PostgreSQL little work (one chat row locked and bumped, one message row, one
-- event) but a whole transaction: executor start-ups, a trigger run, a commit. Under load the
-- service gathers the sends that arrive while it is busy and makes them one call of this
-- function (ReceiptsStore.sends, a TenantBatcher): the same outcome for each as
-- receipts.send_message, with the statements, the trigger run and the commit shared. Each chat
-- appears at most once, so every message still gets its own message.created event, as one
-- send at a time gives.
--
-- Locks: the chat rows first, all at once in chat order (send_message locks its one). Under
-- them, nothing can send into these chats or change their members, so the next statement
-- sees every earlier send (a repeated id is found) and each chat's last_seq is final.
--
-- Lookups per request: each request's chat is an EXISTS and its message a LATERAL subquery
-- with LIMIT 1, neither flattened into a join, so each runs with that request's key. A
-- plain join planned while the tables were nearly empty (a new database, before
-- autovacuum's first ANALYZE; PL/pgSQL keeps that plan until the next one) read all of the
-- tenant's chats and messages once per batch (on a new database, half the batches a second
-- or less of this form's).
CREATE OR REPLACE FUNCTION receipts.send_each(p_tenant text, p_chats text[], p_messages text[], p_senders text[], p_bodies text[])
RETURNS TABLE (request integer, outcome text, seq bigint, created_at timestamptz)
-- Up to a hundred requests against tables of any size: always index lookups per request.
LANGUAGE plpgsql SET enable_hashjoin = off SET enable_mergejoin = off AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    IF cardinality(p_chats) <> cardinality(p_messages) OR cardinality(p_chats) <> cardinality(p_senders)
       OR cardinality(p_chats) <> cardinality(p_bodies) THEN
        RAISE EXCEPTION 'receipts.send_each: % chats, % messages, % senders, % bodies',
            cardinality(p_chats), cardinality(p_messages), cardinality(p_senders), cardinality(p_bodies);
    END IF;
    IF (SELECT count(DISTINCT chat) FROM unnest(p_chats) AS chat) <> cardinality(p_chats) THEN
        RAISE EXCEPTION 'receipts.send_each: a chat appears twice';
    END IF;
    PERFORM FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = ANY (p_chats)
    ORDER BY chat.chat_id
    FOR UPDATE;

    RETURN QUERY
    WITH request AS (
        SELECT each.position::integer AS position, each.chat, each.message, each.sender, each.body
        FROM unnest(p_chats, p_messages, p_senders, p_bodies) WITH ORDINALITY AS each(chat, message, sender, body, position)
    ),
    judged AS (
        SELECT request.position, request.chat, request.message, request.sender, request.body,
               CASE WHEN NOT EXISTS (SELECT FROM receipts.chats AS chat
                                     WHERE chat.tenant_id = p_tenant AND chat.chat_id = request.chat) THEN 'chat_not_found'
                    WHEN existing.seq IS NOT NULL AND existing.sender_id = request.sender AND existing.body = request.body THEN 'existing'
                    WHEN existing.seq IS NOT NULL THEN 'conflict'
                    WHEN EXISTS (SELECT FROM receipts.deleted_messages AS deleted
                                 WHERE deleted.tenant_id = p_tenant AND deleted.chat_id = request.chat
                                   AND deleted.message_id = request.message) THEN 'conflict'
                    WHEN NOT EXISTS (SELECT FROM receipts.chat_members AS member
                                     WHERE member.tenant_id = p_tenant AND member.chat_id = request.chat
                                       AND member.user_id = request.sender AND member.left_at IS NULL) THEN 'not_member'
                    ELSE 'created' END AS outcome,
               existing.seq AS existing_seq, existing.created_at AS existing_created_at
        FROM request
        LEFT JOIN LATERAL (
            SELECT existing.seq, existing.sender_id, existing.body, existing.created_at
            FROM receipts.messages AS existing
            WHERE existing.tenant_id = p_tenant AND existing.chat_id = request.chat AND existing.message_id = request.message
            LIMIT 1
        ) AS existing ON true
    ),
    bumped AS (
        UPDATE receipts.chats AS chat SET last_seq = chat.last_seq + 1
        FROM judged
        WHERE chat.tenant_id = p_tenant AND chat.chat_id = judged.chat AND judged.outcome = 'created'
        RETURNING chat.chat_id, chat.last_seq
    ),
    inserted AS (
        INSERT INTO receipts.messages AS message (tenant_id, chat_id, message_id, seq, sender_id, body)
        SELECT p_tenant, judged.chat, judged.message, bumped.last_seq, judged.sender, judged.body
        FROM judged JOIN bumped ON bumped.chat_id = judged.chat
        ORDER BY judged.chat
        RETURNING message.chat_id, message.seq, message.created_at
    )
    SELECT judged.position, judged.outcome,
           coalesce(inserted.seq, judged.existing_seq), coalesce(inserted.created_at, judged.existing_created_at)
    FROM judged
    LEFT JOIN inserted ON inserted.chat_id = judged.chat
    ORDER BY judged.position;
END;
$$;
COMMENT ON FUNCTION receipts.send_each(text, text[], text[], text[], text[]) IS
    'Sends one message into each chat of the arrays, as many receipts.send_message calls would, in one statement: one row per request, in order.';
