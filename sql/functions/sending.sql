-- Sending messages.

-- Whom a message names, of the users a request of receipts.send_each names
-- (p_mention_requests beside p_mention_users: the request's position, 1-based, beside each
-- user): those who were members when it was sent (a membership period holding p_seq), but
-- its sender, each once, in the order given. What a new message keeps (messages.mentions),
-- and what a repeat of it must name to be the same message: as membership periods do not
-- change after the fact, a repeat compares against the members at the message's own seq,
-- whoever joined or left since. SQL, STABLE, no SET: inlined by its callers.
CREATE OR REPLACE FUNCTION receipts.named_mentions(
    p_tenant text, p_chat text, p_sender text, p_seq bigint,
    p_mention_requests integer[], p_mention_users text[], p_request integer)
RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT ARRAY(
        SELECT named.user_id
        FROM unnest(p_mention_requests, p_mention_users) WITH ORDINALITY AS named(request, user_id, position)
        WHERE named.request = p_request AND named.user_id <> p_sender
          AND EXISTS (SELECT FROM receipts.membership_periods AS period
                      WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = named.user_id
                        AND period.after_seq < p_seq AND (period.until_seq IS NULL OR period.until_seq >= p_seq))
        GROUP BY named.user_id ORDER BY min(named.position))
$$;
COMMENT ON FUNCTION receipts.named_mentions(text, text, text, bigint, integer[], text[], integer) IS
    'Whom a message of request p_request names: the users it lists who were members at p_seq, but its sender, each once, in the order given.';

-- Sends, for any number of requests in one statement, one message into each chat of the
-- arrays: created | existing (the same id with the same content: sender, text, thread and
-- mentions) | conflict (same id, other content, or the id of a deleted message) |
-- not_member | chat_not_found, with the message's seq and time. receipts.send_message is
-- one request of it, for psql.
--
-- Mentions: p_mentions_all (per request; null: none) mentions every member the message is
-- sent to; p_mention_requests and p_mention_users list the users each request names (the
-- request's position, 1-based, beside each user). Of those, members other than the sender
-- are kept, each once, in the order given (messages.mentions, receipts.named_mentions), and
-- every member mentioned gets a row of receipts.mentions, what unread mention counts read.
-- A repeat of an existing message changes none of them.
--
-- Threads: p_threads (per request; null: the main timeline) names the root of the thread the
-- message replies in: a message of the same chat that is no reply (else thread_not_found,
-- or thread_is_reply). A reply counts in its root's summary (receipts.threads).
--
-- A send costs PostgreSQL little work (one chat row locked and bumped, one message row, one
-- event) but a whole transaction: executor start-ups, a trigger run, a commit. Under load the
-- service gathers the sends that arrive while it is busy and makes them one call of this
-- function (ReceiptsStore.sends, a TenantBatcher; a send that finds the tenant idle is a
-- batch of one): each request gets the outcome it would get alone, with the statements, the
-- trigger run and the commit shared. Each chat appears at most once, so every message still
-- gets its own message.created event, as one send at a time gives.
--
-- Locks: the chat rows first, all at once in chat order. They serialise sends (and joins,
-- leaves) of one chat: under them, nothing can send into these chats or change their
-- members, so the next statement sees every earlier send (a repeated id is found, also the
-- second of two concurrent sends of one id) and each chat's last_seq is final: seq is
-- gap-free and ordered per chat.
--
-- Lookups per request: each request's chat is an EXISTS and its message a LATERAL subquery
-- with LIMIT 1, neither flattened into a join, so each runs with that request's key; the
-- message (and a reply's root, receipts.message_by_id) by the key's index whatever the
-- statistics, as receipts.message_by_id explains (an id matched as a range of one value,
-- ordered by it, sorts off): a generic plan that took a chat for a row walked a chat of
-- 10,000 through its sender's index for each send's id check (4 ms, in a database of 1,000
-- tenants).
-- Plans: index lookups per request, as for the reads and deletes batched alike (see
-- receipts.mark_read_each): nested loops only and no sequential scans, planned once per
-- session, generically. A plain join planned while the tables were nearly empty (a new
-- database, before autovacuum's first ANALYZE) read all of the tenant's chats and messages
-- once per batch; and planning the statement for each call's values cost 1 ms a call (as
-- much as the sends of a batch of ten: a send alone took 0.2 ms of its function's time as a
-- PL/pgSQL function of its own, and 1.3 ms here; 0.3 ms planned once).
CREATE OR REPLACE FUNCTION receipts.send_each(
    p_tenant text, p_chats text[], p_messages text[], p_senders text[], p_bodies text[],
    p_mentions_all boolean[] DEFAULT NULL, p_mention_requests integer[] DEFAULT NULL, p_mention_users text[] DEFAULT NULL,
    p_threads text[] DEFAULT NULL)
RETURNS TABLE (request integer, outcome text, seq bigint, created_at timestamptz, mentions text[])
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET enable_sort = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.begin_batch('receipts.send_each', p_tenant, ARRAY['chats', 'messages', 'senders', 'bodies'],
                                 ARRAY[cardinality(p_chats), cardinality(p_messages), cardinality(p_senders), cardinality(p_bodies)],
                                 p_chats);

    RETURN QUERY
    WITH request AS (
        SELECT each.position::integer AS position, each.chat, each.message, each.sender, each.body,
               coalesce(p_mentions_all[each.position], false) AS mentions_all, p_threads[each.position] AS thread,
               coalesce(p_mentions_all[each.position], false) OR each.position = ANY (p_mention_requests) AS mentions_any
        FROM unnest(p_chats, p_messages, p_senders, p_bodies) WITH ORDINALITY AS each(chat, message, sender, body, position)
    ),
    judged AS (
        SELECT request.position, request.chat, request.message, request.sender, request.body, request.mentions_all,
               request.thread, root.seq AS root_seq, request.mentions_any,
               CASE WHEN NOT EXISTS (SELECT FROM receipts.chats AS chat
                                     WHERE chat.tenant_id = p_tenant AND chat.chat_id = request.chat) THEN 'chat_not_found'
                    WHEN existing.seq IS NOT NULL AND existing.sender_id = request.sender AND existing.body = request.body
                         AND existing.thread_id IS NOT DISTINCT FROM request.thread
                         AND existing.mentions_all = request.mentions_all
                         AND existing.mentions = receipts.named_mentions(p_tenant, request.chat, request.sender, existing.seq,
                                                                         p_mention_requests, p_mention_users, request.position)
                    THEN 'existing'
                    WHEN existing.seq IS NOT NULL THEN 'conflict'
                    WHEN EXISTS (SELECT FROM receipts.deleted_messages AS deleted
                                 WHERE deleted.tenant_id = p_tenant AND deleted.chat_id = request.chat
                                   AND deleted.message_id = request.message) THEN 'conflict'
                    WHEN NOT EXISTS (SELECT FROM receipts.chat_members AS member
                                     WHERE member.tenant_id = p_tenant AND member.chat_id = request.chat
                                       AND member.user_id = request.sender AND member.left_at IS NULL) THEN 'not_member'
                    WHEN request.thread IS NOT NULL AND root.seq IS NULL THEN 'thread_not_found'
                    WHEN root.thread_id IS NOT NULL THEN 'thread_is_reply'
                    ELSE 'created' END AS outcome,
               existing.seq AS existing_seq, existing.created_at AS existing_created_at
        FROM request
        LEFT JOIN LATERAL (
            SELECT existing.seq, existing.sender_id, existing.body, existing.created_at,
                   existing.thread_id, existing.mentions_all, existing.mentions
            FROM receipts.messages AS existing
            WHERE existing.tenant_id = p_tenant AND existing.chat_id = request.chat
              AND existing.message_id >= request.message AND existing.message_id <= request.message
            ORDER BY existing.message_id
            LIMIT 1
        ) AS existing ON true
        LEFT JOIN LATERAL receipts.message_by_id(p_tenant, request.chat, request.thread) AS root ON true
    ),
    -- The chat's next seq; and, for a reply or a message with mentions, the seq that tells
    -- unread counts where to look for them (sql/migrations/0015_unread_gates.sql).
    bumped AS (
        UPDATE receipts.chats AS chat SET
            last_seq = chat.last_seq + 1,
            last_reply_seq = CASE WHEN judged.root_seq IS NOT NULL THEN chat.last_seq + 1 ELSE chat.last_reply_seq END,
            last_mention_seq = CASE WHEN judged.mentions_any THEN chat.last_seq + 1 ELSE chat.last_mention_seq END
        FROM judged
        WHERE chat.tenant_id = p_tenant AND chat.chat_id = judged.chat AND judged.outcome = 'created'
        RETURNING chat.chat_id, chat.last_seq
    ),
    inserted AS (
        INSERT INTO receipts.messages AS message (tenant_id, chat_id, message_id, seq, sender_id, body, mentions, mentions_all, thread_id)
        SELECT p_tenant, judged.chat, judged.message, bumped.last_seq, judged.sender, judged.body,
               -- The members it names, but its sender, each once, in the order given.
               receipts.named_mentions(p_tenant, judged.chat, judged.sender, bumped.last_seq,
                                       p_mention_requests, p_mention_users, judged.position),
               judged.mentions_all, judged.thread
        FROM judged JOIN bumped ON bumped.chat_id = judged.chat
        ORDER BY judged.chat
        RETURNING message.chat_id, message.seq, message.created_at, message.sender_id, message.mentions, message.mentions_all
    ),
    -- A reply counts in its root's summary.
    threaded AS (
        INSERT INTO receipts.threads AS thread (tenant_id, chat_id, root_seq, replies, last_reply_at)
        SELECT p_tenant, judged.chat, judged.root_seq, 1, inserted.created_at
        FROM judged JOIN inserted ON inserted.chat_id = judged.chat
        WHERE judged.root_seq IS NOT NULL
        ORDER BY judged.chat
        ON CONFLICT (tenant_id, chat_id, root_seq) DO UPDATE
            SET replies = thread.replies + 1, last_reply_at = excluded.last_reply_at
    ),
    -- A row per member mentioned: the named ones, or every member but the sender.
    mentioned AS (
        INSERT INTO receipts.mentions (tenant_id, chat_id, user_id, seq)
        SELECT p_tenant, inserted.chat_id, named.user_id, inserted.seq
        FROM inserted CROSS JOIN LATERAL unnest(inserted.mentions) AS named(user_id)
        WHERE NOT inserted.mentions_all
        UNION ALL
        SELECT p_tenant, inserted.chat_id, member.user_id, inserted.seq
        FROM inserted
        JOIN receipts.chat_members AS member
            ON member.tenant_id = p_tenant AND member.chat_id = inserted.chat_id AND member.left_at IS NULL
           AND member.user_id <> inserted.sender_id
        WHERE inserted.mentions_all
    )
    SELECT judged.position, judged.outcome,
           coalesce(inserted.seq, judged.existing_seq), coalesce(inserted.created_at, judged.existing_created_at),
           -- A new message's mentions as a message shows them: every member but the sender
           -- when it mentioned all.
           CASE WHEN inserted.mentions_all
                THEN ARRAY(SELECT member.user_id::text FROM receipts.chat_members AS member
                           WHERE member.tenant_id = p_tenant AND member.chat_id = inserted.chat_id
                             AND member.left_at IS NULL AND member.user_id <> inserted.sender_id
                           ORDER BY member.user_id)
                ELSE inserted.mentions END
    FROM judged
    LEFT JOIN inserted ON inserted.chat_id = judged.chat
    ORDER BY judged.position;
END;
$$;
COMMENT ON FUNCTION receipts.send_each(text, text[], text[], text[], text[], boolean[], integer[], text[], text[]) IS
    'Sends one message into each chat of the arrays (each chat once), in one statement, with its mentions (p_mentions_all per request; p_mention_requests beside p_mention_users: whom each names) and thread (p_threads: the root, or null): one row per request, in order, with created | existing | conflict | not_member | chat_not_found | thread_not_found | thread_is_reply, the seq, the time and (created) whom it mentions.';

-- One request of receipts.send_each.
CREATE OR REPLACE FUNCTION receipts.send_message(p_tenant text, p_chat text, p_message text, p_sender text, p_body text)
RETURNS TABLE (outcome text, seq bigint, created_at timestamptz)
LANGUAGE sql AS $$
    SELECT sent.outcome, sent.seq, sent.created_at
    FROM receipts.send_each(p_tenant, ARRAY[p_chat], ARRAY[p_message], ARRAY[p_sender], ARRAY[p_body]) AS sent;
$$;
COMMENT ON FUNCTION receipts.send_message(text, text, text, text, text) IS
    'Sends a message: created | existing (same id, same sender, text, thread and mentions) | conflict (same id, other content) | not_member | chat_not_found. From psql: SELECT * FROM receipts.send_message(''tenant'', ''chat'', ''id'', ''sender'', ''text'');';

-- Edits a message's text: edited | unchanged (the same text: nothing written, no event) |
-- not_sender (p_editor is not null and did not send it) | message_not_found (never sent, or
-- deleted) | chat_not_found, with the message's edited_at. p_editor null: whoever sent it
-- (the tenant key). An edit changes the body and edited_at only: receipts, counts and labels
-- stay as they were, and the message is unread again for nobody. Its message.edited event
-- goes to the chat's members of now (the chat's audience version) and the tenant key, and
-- carries no text. The row lock orders concurrent edits of one message: the last to commit
-- stays, and each that changed the text has its event.
CREATE OR REPLACE FUNCTION receipts.edit_message(p_tenant text, p_chat text, p_message text, p_editor text, p_body text)
RETURNS TABLE (outcome text, edited_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_seq bigint;
    v_sender text;
    v_body text;
    v_edited_at timestamptz;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    -- By the key's index whatever the statistics (see receipts.message_by_id).
    SELECT message.seq, message.sender_id, message.body, message.edited_at INTO v_seq, v_sender, v_body, v_edited_at
    FROM receipts.messages AS message
    WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
      AND message.message_id >= p_message AND message.message_id <= p_message
    ORDER BY message.message_id
    LIMIT 1
    FOR UPDATE;
    IF NOT FOUND THEN
        IF NOT EXISTS (SELECT FROM receipts.chats AS chat WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat) THEN
            RETURN QUERY SELECT 'chat_not_found', NULL::timestamptz;
        ELSE
            RETURN QUERY SELECT 'message_not_found', NULL::timestamptz;
        END IF;
        RETURN;
    END IF;
    IF p_editor IS NOT NULL AND p_editor <> v_sender THEN
        RETURN QUERY SELECT 'not_sender', v_edited_at;
        RETURN;
    END IF;
    IF v_body = p_body THEN
        RETURN QUERY SELECT 'unchanged', v_edited_at;
        RETURN;
    END IF;

    UPDATE receipts.messages AS message SET body = p_body, edited_at = now()
    WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat AND message.seq = v_seq;
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, audience_version)
    SELECT p_tenant, nextval('receipts.event_ids'), pg_current_xact_id(), 'message.edited', p_chat, v_sender,
           ARRAY[p_message], chat.audience_version
    FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat;
    PERFORM receipts.wake_listeners();
    RETURN QUERY SELECT 'edited', now();
END;
$$;
COMMENT ON FUNCTION receipts.edit_message(text, text, text, text, text) IS
    'Edits a message''s text (p_editor: only if they sent it; null: whoever did): edited | unchanged | not_sender | message_not_found | chat_not_found, with edited_at. Receipts and counts stay; a message.edited event. From psql: SELECT * FROM receipts.edit_message(''tenant'', ''chat'', ''id'', NULL, ''new text'');';
