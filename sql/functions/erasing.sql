-- Erasing a user or a tenant (docs/api.md, "Deleting, erasing and credentials").
--
-- A request (receipts.request_user_erasure) does at once what must hold at once: the user
-- leaves every chat and their memberships are forgotten (so they are no recipient of any
-- message, and the same id joining again is a new user, a recipient only of what is sent
-- after; nor in the audience of any event, even of a deleted chat), their settings go, their
-- tokens are revoked. It records the rest in
-- receipts.erasures and receipts.erasure_chats: for each chat, the last message then
-- (through_seq) and the receipt chunk that held the user's receipts. The service's erasure
-- worker calls receipts.erasure_step until it says idle; each call is one transaction of
-- bounded work (at most p_batch messages of one chat, or p_batch * 5 of the tenant's events),
-- so no chat's rows stay locked for long and a restart resumes where the last commit left:
--   1. chat by chat, the user's entries leave the chunk rows of messages up to through_seq
--      (readBy, deliveredTo, their times, hidden reads); with deletes_messages, the user's
--      messages there are deleted as receipts.delete_message does (counts, events);
--   2. the events naming the user as userId, up to through_event_id, leave the log, page by
--      page of the tenant's events (the log's key is (tenant_id, event_id));
--   3. user.erased goes to the tenant key, and the erasure is done.
-- What the same id does after the request is never touched: their receipts are on messages
-- after through_seq (they are a recipient of nothing before), their events have later ids.
-- Removing events leaves gaps in the ids that readers step over as they step over ids of
-- transactions that rolled back (sql/functions/events.sql): a stream resumes as before.
--
-- A tenant's erasure (receipts.request_tenant_erasure) stops its keys and tokens at once
-- (erasing_since: the credential directory leaves it out) and the worker removes its rows,
-- p_batch rows of one table per step, children before parents, the tenant row last.
--
-- One worker at a time across instances: each step first takes or renews the lease
-- 'erasure' (receipts.background_leases) for p_holder; a step of another holder answers
-- 'not_holder' until the lease expires (a stopped instance's work is taken over then). The
-- erasure's row is locked by each step, so even a holder whose lease ran out while a step was
-- under way never runs a step beside the next holder's.

CREATE OR REPLACE FUNCTION receipts.request_user_erasure(p_tenant text, p_user text, p_delete_messages boolean)
RETURNS TABLE (state text, requested_at timestamptz)
LANGUAGE plpgsql SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_requested_at timestamptz;
    v_done_at timestamptz;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT erasure.requested_at, erasure.done_at INTO v_requested_at, v_done_at FROM receipts.erasures AS erasure
    WHERE erasure.tenant_id = p_tenant AND erasure.user_id = p_user
    FOR UPDATE;
    IF FOUND AND v_done_at IS NULL THEN
        -- Asked again while under way: the same erasure (deleting the messages if asked now).
        UPDATE receipts.erasures AS erasure SET deletes_messages = erasure.deletes_messages OR p_delete_messages
        WHERE erasure.tenant_id = p_tenant AND erasure.user_id = p_user;
        RETURN QUERY SELECT 'pending'::text, v_requested_at;
        RETURN;
    END IF;
    -- The user's chats, locked in chat order (as sends take them): no message of theirs is
    -- sent after through_seq is read, and no join or leave moves under it.
    PERFORM FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant
      AND chat.chat_id IN (SELECT member.chat_id FROM receipts.chat_members AS member
                           WHERE member.tenant_id = p_tenant AND member.user_id = p_user)
    ORDER BY chat.chat_id
    FOR UPDATE;
    INSERT INTO receipts.erasures AS erasure (tenant_id, user_id, deletes_messages)
    VALUES (p_tenant, p_user, p_delete_messages)
    ON CONFLICT (tenant_id, user_id) DO UPDATE
        SET requested_at = now(), deletes_messages = excluded.deletes_messages, through_event_id = 0, events_after = 0,
            done_at = NULL;
    DELETE FROM receipts.erasure_chats AS work WHERE work.tenant_id = p_tenant AND work.user_id = p_user;
    INSERT INTO receipts.erasure_chats (tenant_id, user_id, chat_id, receipt_chunk, through_seq)
    SELECT p_tenant, p_user, member.chat_id, member.receipt_chunk, chat.last_seq
    FROM receipts.chat_members AS member
    JOIN receipts.chats AS chat ON chat.tenant_id = member.tenant_id AND chat.chat_id = member.chat_id
    WHERE member.tenant_id = p_tenant AND member.user_id = p_user;
    -- No message mentions them any more: their id leaves the messages that named them, and
    -- their mention rows go.
    UPDATE receipts.messages AS message SET mentions = array_remove(message.mentions, p_user::text)
    FROM receipts.mentions AS mention
    WHERE mention.tenant_id = p_tenant AND mention.user_id = p_user
      AND mention.chat_id IN (SELECT work.chat_id FROM receipts.erasure_chats AS work
                              WHERE work.tenant_id = p_tenant AND work.user_id = p_user)
      AND message.tenant_id = p_tenant AND message.chat_id = mention.chat_id AND message.seq = mention.seq
      AND p_user = ANY (message.mentions);
    DELETE FROM receipts.mentions AS mention
    WHERE mention.tenant_id = p_tenant AND mention.user_id = p_user
      AND mention.chat_id IN (SELECT work.chat_id FROM receipts.erasure_chats AS work
                              WHERE work.tenant_id = p_tenant AND work.user_id = p_user);
    -- They leave every chat and their memberships are forgotten (periods go with the rows),
    -- deleted chats' included: they are in the audience of no event any more.
    DELETE FROM receipts.chat_members AS member WHERE member.tenant_id = p_tenant AND member.user_id = p_user;
    DELETE FROM receipts.audience_periods AS period WHERE period.tenant_id = p_tenant AND period.user_id = p_user;
    DELETE FROM receipts.users AS setting WHERE setting.tenant_id = p_tenant AND setting.user_id = p_user;
    PERFORM receipts.revoke_user_tokens(p_tenant, p_user);
    -- Every event id handed out before this one is older than the request (the user's
    -- readings under way held member rows, deleted above: they committed first).
    UPDATE receipts.erasures AS erasure SET through_event_id = nextval('receipts.event_ids')
    WHERE erasure.tenant_id = p_tenant AND erasure.user_id = p_user
    RETURNING erasure.requested_at INTO v_requested_at;
    RETURN QUERY SELECT 'pending'::text, v_requested_at;
END;
$$;
COMMENT ON FUNCTION receipts.request_user_erasure(text, text, boolean) IS
    'Erases a user: at once they leave every chat (memberships forgotten), settings and tokens go; the rest is recorded for the erasure worker. Returns pending and when it was asked.';

CREATE OR REPLACE FUNCTION receipts.user_erasure(p_tenant text, p_user text)
RETURNS TABLE (state text, requested_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT CASE WHEN erasure.done_at IS NULL THEN 'pending' ELSE 'done' END, erasure.requested_at
    FROM receipts.erasures AS erasure
    WHERE erasure.tenant_id = p_tenant AND erasure.user_id = p_user;
END;
$$;
COMMENT ON FUNCTION receipts.user_erasure(text, text) IS 'The state of a user''s latest erasure (no row: none was asked).';

CREATE OR REPLACE FUNCTION receipts.request_tenant_erasure(p_tenant text)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    IF NOT EXISTS (SELECT FROM receipts.tenants AS tenant WHERE tenant.tenant_id = p_tenant) THEN
        IF EXISTS (SELECT FROM receipts.tenant_erasures AS erasure WHERE erasure.tenant_id = p_tenant AND erasure.done_at IS NOT NULL) THEN
            RETURN 'done';
        END IF;
        RETURN 'tenant_not_found';
    END IF;
    UPDATE receipts.tenants AS tenant SET erasing_since = now() WHERE tenant.tenant_id = p_tenant AND tenant.erasing_since IS NULL;
    DELETE FROM receipts.api_keys AS key WHERE key.tenant_id = p_tenant;
    INSERT INTO receipts.tenant_erasures AS erasure (tenant_id) VALUES (p_tenant)
    ON CONFLICT (tenant_id) DO UPDATE SET done_at = NULL WHERE erasure.done_at IS NOT NULL;
    PERFORM receipts.credentials_changed(p_tenant);
    RETURN 'pending';
END;
$$;
COMMENT ON FUNCTION receipts.request_tenant_erasure(text) IS
    'Erases a tenant: its keys and tokens stop at once, its rows go in the background: pending | done | tenant_not_found.';

-- One step of a user's erasure (the caller holds its row locked): one chat's batch of
-- receipts (and messages), or a page of events, or the end.
CREATE OR REPLACE FUNCTION receipts.erase_user_step(p_tenant text, p_user text, p_batch integer)
RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_work receipts.erasure_chats;
    v_erasure receipts.erasures;
    v_to bigint;
    v_message text;
    v_upper bigint;
    v_count bigint;
    v_cap bigint;
    v_deleted boolean := false;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT * INTO v_erasure FROM receipts.erasures AS erasure WHERE erasure.tenant_id = p_tenant AND erasure.user_id = p_user;
    SELECT * INTO v_work FROM receipts.erasure_chats AS work
    WHERE work.tenant_id = p_tenant AND work.user_id = p_user
    ORDER BY work.chat_id
    LIMIT 1;
    IF FOUND THEN
        v_to := least(v_work.done_through_seq + p_batch, v_work.through_seq);
        IF v_erasure.deletes_messages THEN
            -- At most a tenth of a batch of their messages a step: each is a delete of its own.
            SELECT count(*), max(own.seq) INTO v_count, v_cap FROM (
                SELECT message.seq FROM receipts.messages AS message
                WHERE message.tenant_id = p_tenant AND message.chat_id = v_work.chat_id AND message.sender_id = p_user
                  AND message.seq > v_work.done_through_seq AND message.seq <= v_to
                ORDER BY message.seq LIMIT greatest(p_batch / 10, 1)) AS own;
            IF v_count >= greatest(p_batch / 10, 1) THEN
                v_to := v_cap;
            END IF;
            FOR v_message IN
                SELECT message.message_id FROM receipts.messages AS message
                WHERE message.tenant_id = p_tenant AND message.chat_id = v_work.chat_id AND message.sender_id = p_user
                  AND message.seq > v_work.done_through_seq AND message.seq <= v_to
                ORDER BY message.seq
            LOOP
                PERFORM receipts.delete_message(p_tenant, v_work.chat_id, v_message, NULL);
                v_deleted := true;
            END LOOP;
        END IF;
        -- Their entries leave the chunk rows, each array with its times kept in step.
        UPDATE receipts.receipt_chunks AS receipt SET
            read_by = coalesce((SELECT array_agg(entry.user_id ORDER BY entry.position)
                                FROM unnest(receipt.read_by) WITH ORDINALITY AS entry(user_id, position)
                                WHERE entry.user_id <> p_user), '{}'),
            read_at = coalesce((SELECT array_agg(entry.at ORDER BY entry.position)
                                FROM unnest(receipt.read_by, receipt.read_at) WITH ORDINALITY AS entry(user_id, at, position)
                                WHERE entry.user_id <> p_user), '{}'),
            delivered_to = coalesce((SELECT array_agg(entry.user_id ORDER BY entry.position)
                                     FROM unnest(receipt.delivered_to) WITH ORDINALITY AS entry(user_id, position)
                                     WHERE entry.user_id <> p_user), '{}'),
            delivered_at = coalesce((SELECT array_agg(entry.at ORDER BY entry.position)
                                     FROM unnest(receipt.delivered_to, receipt.delivered_at) WITH ORDINALITY AS entry(user_id, at, position)
                                     WHERE entry.user_id <> p_user), '{}'),
            hidden_read_by = array_remove(receipt.hidden_read_by, p_user::text)
        WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = v_work.chat_id AND receipt.chunk = v_work.receipt_chunk
          AND receipt.seq > v_work.done_through_seq AND receipt.seq <= v_to
          AND (p_user = ANY (receipt.read_by) OR p_user = ANY (receipt.delivered_to) OR p_user = ANY (receipt.hidden_read_by));
        IF v_to >= v_work.through_seq THEN
            DELETE FROM receipts.erasure_chats AS work
            WHERE work.tenant_id = p_tenant AND work.user_id = p_user AND work.chat_id = v_work.chat_id;
        ELSE
            UPDATE receipts.erasure_chats AS work SET done_through_seq = v_to
            WHERE work.tenant_id = p_tenant AND work.user_id = p_user AND work.chat_id = v_work.chat_id;
        END IF;
        -- 'messages' when this step deleted some (it wrote events), else 'receipts'.
        RETURN CASE WHEN v_deleted THEN 'messages' ELSE 'receipts' END;
    END IF;

    -- The next page of the tenant's events up to through_event_id (by the log's key).
    SELECT max(page.event_id) INTO v_upper FROM (
        SELECT event.event_id FROM receipts.events AS event
        WHERE event.tenant_id = p_tenant AND event.event_id > v_erasure.events_after AND event.event_id <= v_erasure.through_event_id
        ORDER BY event.event_id LIMIT p_batch * 5) AS page;
    IF v_upper IS NOT NULL THEN
        DELETE FROM receipts.events AS event
        WHERE event.tenant_id = p_tenant AND event.event_id > v_erasure.events_after AND event.event_id <= v_upper
          AND event.user_id = p_user;
        UPDATE receipts.erasures AS erasure SET events_after = v_upper
        WHERE erasure.tenant_id = p_tenant AND erasure.user_id = p_user;
        RETURN 'events';
    END IF;

    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, audience)
    VALUES (p_tenant, nextval('receipts.event_ids'), pg_current_xact_id(), 'user.erased', NULL, p_user, '{}');
    UPDATE receipts.erasures AS erasure SET done_at = now() WHERE erasure.tenant_id = p_tenant AND erasure.user_id = p_user;
    PERFORM receipts.wake_listeners();
    RETURN 'done';
END;
$$;
COMMENT ON FUNCTION receipts.erase_user_step(text, text, integer) IS
    'One bounded step of a user''s erasure: receipts | messages (it deleted some of theirs) | events | done (user.erased sent).';

-- One step of a tenant's erasure: up to p_batch rows of one table, children first.
CREATE OR REPLACE FUNCTION receipts.erase_tenant_step(p_tenant text, p_batch integer)
RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_removed integer;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    -- The staged lines of its imports (no foreign key takes them: sql/migrations/0028_imports.sql).
    DELETE FROM receipts.import_rows WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM receipts.import_rows WHERE tenant_id = p_tenant LIMIT p_batch));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    IF v_removed > 0 THEN RETURN 'receipts'; END IF;
    DELETE FROM receipts.receipt_chunks WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM receipts.receipt_chunks WHERE tenant_id = p_tenant LIMIT p_batch));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    IF v_removed > 0 THEN RETURN 'receipts'; END IF;
    DELETE FROM receipts.mentions WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM receipts.mentions WHERE tenant_id = p_tenant LIMIT p_batch));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    IF v_removed > 0 THEN RETURN 'messages'; END IF;
    DELETE FROM receipts.messages WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM receipts.messages WHERE tenant_id = p_tenant LIMIT p_batch));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    IF v_removed > 0 THEN RETURN 'messages'; END IF;
    DELETE FROM receipts.events WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM receipts.events WHERE tenant_id = p_tenant LIMIT p_batch * 5));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    IF v_removed > 0 THEN RETURN 'events'; END IF;
    DELETE FROM receipts.membership_periods WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM receipts.membership_periods WHERE tenant_id = p_tenant LIMIT p_batch));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    IF v_removed > 0 THEN RETURN 'members'; END IF;
    DELETE FROM receipts.audience_periods WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM receipts.audience_periods WHERE tenant_id = p_tenant LIMIT p_batch));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    IF v_removed > 0 THEN RETURN 'members'; END IF;
    DELETE FROM receipts.chat_members WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM receipts.chat_members WHERE tenant_id = p_tenant LIMIT p_batch));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    IF v_removed > 0 THEN RETURN 'members'; END IF;
    -- Chats take their deleted-message ids and erasure work with them.
    DELETE FROM receipts.chats WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM receipts.chats WHERE tenant_id = p_tenant LIMIT greatest(p_batch / 10, 1)));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    IF v_removed > 0 THEN RETURN 'chats'; END IF;
    DELETE FROM receipts.users WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM receipts.users WHERE tenant_id = p_tenant LIMIT p_batch));
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    IF v_removed > 0 THEN RETURN 'users'; END IF;
    -- The rest is small (keys, revocations, erasures, purges, retention): with the tenant row.
    DELETE FROM receipts.tenants WHERE tenant_id = p_tenant;
    UPDATE receipts.tenant_erasures AS erasure SET done_at = now() WHERE erasure.tenant_id = p_tenant;
    RETURN 'done';
END;
$$;
COMMENT ON FUNCTION receipts.erase_tenant_step(text, integer) IS
    'One bounded step of a tenant''s erasure: up to p_batch rows of one table, the tenant row last (then done).';

-- The worker's call: takes or renews the lease, then one step of the oldest pending erasure
-- (tenants first). As the owner, beyond row-level security, to find work of any tenant; each
-- step runs scoped to its tenant. Answers not_holder, idle, or the step's outcome with whose.
-- jit off: each step is bounded work of index lookups and short ranges; compiling its
-- statements would cost more than running them.
CREATE OR REPLACE FUNCTION receipts.erasure_step(p_holder text, p_lease_seconds integer, p_batch integer)
RETURNS TABLE (outcome text, tenant_id text, user_id text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off AS $$
#variable_conflict use_column
DECLARE
    v_tenant text;
    v_user text;
BEGIN
    INSERT INTO receipts.background_leases AS lease (name, holder, expires_at)
    VALUES ('erasure', p_holder, clock_timestamp() + make_interval(secs => p_lease_seconds))
    ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
    WHERE lease.holder = excluded.holder OR lease.expires_at < clock_timestamp();
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_holder'::text, NULL::text, NULL::text;
        RETURN;
    END IF;
    SELECT erasure.tenant_id INTO v_tenant FROM receipts.tenant_erasures AS erasure
    WHERE erasure.done_at IS NULL
    ORDER BY erasure.requested_at
    LIMIT 1
    FOR UPDATE;
    IF FOUND THEN
        RETURN QUERY SELECT receipts.erase_tenant_step(v_tenant, p_batch), v_tenant, NULL::text;
        RETURN;
    END IF;
    SELECT erasure.tenant_id, erasure.user_id INTO v_tenant, v_user FROM receipts.erasures AS erasure
    WHERE erasure.done_at IS NULL
    ORDER BY erasure.requested_at
    LIMIT 1
    FOR UPDATE;
    IF FOUND THEN
        RETURN QUERY SELECT receipts.erase_user_step(v_tenant, v_user, p_batch), v_tenant, v_user;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'idle'::text, NULL::text, NULL::text;
END;
$$;
COMMENT ON FUNCTION receipts.erasure_step(text, integer, integer) IS
    'The erasure worker''s step: takes or renews the lease ''erasure'' for p_holder, then one bounded step of the oldest pending erasure: not_holder | idle | the step''s outcome.';
REVOKE ALL ON FUNCTION receipts.erasure_step(text, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.erasure_step(text, integer, integer) TO receipts_service;
