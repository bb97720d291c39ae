-- 0002: every use case of the service as one SQL function, callable from psql too.
--
-- Each function takes the tenant first and scopes itself to it with receipts.enter_tenant,
-- so a request is one statement (one round trip, one transaction) and row-level security
-- applies to everything it touches when the caller is receipts_service.
-- Outcomes that are not errors of the database (unknown chat, not a member) come back as
-- an `outcome` text, so the service can answer 404/403/409 without parsing messages.

CREATE FUNCTION receipts.enter_tenant(p_tenant text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM set_config('receipts.tenant_id', p_tenant, true);
END;
$$;
COMMENT ON FUNCTION receipts.enter_tenant(text) IS
    'Scopes the current transaction to one tenant: row-level security shows and accepts only its rows.';

-- Membership ------------------------------------------------------------------------------
--
-- A user is a recipient of the messages sent during their membership periods (after_seq <
-- seq <= until_seq). Counting works on seq ranges of those periods, never message by
-- message.

CREATE FUNCTION receipts.membership_seqs(p_tenant text, p_chat text, p_user text)
RETURNS int8multirange
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT coalesce(range_agg(int8range(period.after_seq, period.until_seq, '(]')), '{}')
        FROM receipts.membership_periods AS period
        WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = p_user
    );
END;
$$;
COMMENT ON FUNCTION receipts.membership_seqs(text, text, text) IS
    'The seqs of the messages sent while the user was a member, as one multirange: marking checks each message with seq <@ it.';

CREATE FUNCTION receipts.recipient_seqs(p_tenant text, p_chat text, p_user text, p_after bigint, p_through bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT coalesce(sum(greatest(0,
                   least(coalesce(period.until_seq, p_through), p_through) - greatest(period.after_seq, p_after))), 0)::bigint
        FROM receipts.membership_periods AS period
        WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = p_user
    );
END;
$$;
COMMENT ON FUNCTION receipts.recipient_seqs(text, text, text, bigint, bigint) IS
    'How many messages with p_after < seq <= p_through were sent while the user was a member (own messages included).';

CREATE FUNCTION receipts.own_messages(p_tenant text, p_chat text, p_user text, p_after bigint, p_through bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT count(*) FROM receipts.messages AS message
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat AND message.sender_id = p_user
          AND message.seq > p_after AND message.seq <= p_through
    );
END;
$$;
COMMENT ON FUNCTION receipts.own_messages(text, text, text, bigint, bigint) IS
    'How many messages with p_after < seq <= p_through the user sent (they are never unread for them).';

-- Tenants ---------------------------------------------------------------------------------

CREATE FUNCTION receipts.create_tenant(p_tenant text, p_name text, p_api_key_hash bytea, p_token_secret bytea)
RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    v_created_at timestamptz;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    INSERT INTO receipts.tenants (tenant_id, name, api_key_hash, token_secret)
    VALUES (p_tenant, p_name, p_api_key_hash, p_token_secret)
    RETURNING created_at INTO v_created_at;
    RETURN v_created_at;
END;
$$;
COMMENT ON FUNCTION receipts.create_tenant(text, text, bytea, bytea) IS 'Registers a tenant with the hash of its API key.';

CREATE FUNCTION receipts.replace_api_key(p_tenant text, p_api_key_hash bytea)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    UPDATE receipts.tenants AS tenant SET api_key_hash = p_api_key_hash WHERE tenant.tenant_id = p_tenant;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION receipts.replace_api_key(text, bytea) IS 'Gives a tenant a new API key (hash); the old key stops working.';

-- Looking a key up must search every tenant, before any tenant is known: these two run as
-- their owner, beyond row-level security, and reveal only what the caller proves to know.
CREATE FUNCTION receipts.tenant_for_api_key(p_api_key_hash bytea)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (
        SELECT tenant.tenant_id FROM receipts.tenants AS tenant WHERE tenant.api_key_hash = p_api_key_hash
    );
END;
$$;
COMMENT ON FUNCTION receipts.tenant_for_api_key(bytea) IS 'The tenant whose API key has this SHA-256, if any.';

CREATE FUNCTION receipts.tenant_token_secret(p_tenant text)
RETURNS bytea
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (
        SELECT tenant.token_secret FROM receipts.tenants AS tenant WHERE tenant.tenant_id = p_tenant
    );
END;
$$;
COMMENT ON FUNCTION receipts.tenant_token_secret(text) IS 'The key that signs the tenant''s user tokens, to verify one.';

REVOKE ALL ON FUNCTION receipts.tenant_for_api_key(bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION receipts.tenant_token_secret(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.tenant_for_api_key(bytea) TO receipts_service;
GRANT EXECUTE ON FUNCTION receipts.tenant_token_secret(text) TO receipts_service;

-- Chats -----------------------------------------------------------------------------------

CREATE FUNCTION receipts.put_chat(p_tenant text, p_chat text, p_kind text, p_members text[])
RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_kind text;
    v_current text[];
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    INSERT INTO receipts.chats (tenant_id, chat_id, kind) VALUES (p_tenant, p_chat, p_kind)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        INSERT INTO receipts.chat_members (tenant_id, chat_id, user_id)
        SELECT p_tenant, p_chat, member FROM unnest(p_members) AS member;
        INSERT INTO receipts.membership_periods (tenant_id, chat_id, user_id, after_seq)
        SELECT p_tenant, p_chat, member, 0 FROM unnest(p_members) AS member;
        RETURN 'created';
    END IF;
    SELECT chat.kind INTO v_kind FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat;
    SELECT coalesce(array_agg(member.user_id ORDER BY member.user_id), '{}') INTO v_current
    FROM receipts.chat_members AS member
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.left_at IS NULL;
    IF v_kind = p_kind
       AND v_current = (SELECT coalesce(array_agg(DISTINCT m ORDER BY m), '{}') FROM unnest(p_members) AS m) THEN
        RETURN 'unchanged';
    END IF;
    RETURN 'conflict';
END;
$$;
COMMENT ON FUNCTION receipts.put_chat(text, text, text, text[]) IS
    'Creates a chat with its members, or confirms it: created | unchanged (same kind and current members) | conflict.';

CREATE FUNCTION receipts.join_chat(p_tenant text, p_chat text, p_user text)
RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_kind text;
    v_last_seq bigint;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    -- Locking the chat row orders the join against sends: the new period starts exactly
    -- after the last message sent before it.
    SELECT chat.kind, chat.last_seq INTO v_kind, v_last_seq FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'chat_not_found';
    END IF;
    IF EXISTS (
        SELECT FROM receipts.chat_members AS member
        WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
          AND member.left_at IS NULL
    ) THEN
        RETURN 'already_member';
    END IF;
    IF v_kind = 'direct' THEN
        RETURN 'direct_chat';
    END IF;
    -- A new member has nothing to read from before they joined: their watermarks start
    -- there. A rejoining member keeps theirs (earlier periods may still hold unread messages).
    INSERT INTO receipts.chat_members AS member (tenant_id, chat_id, user_id, read_seq, delivered_seq)
    VALUES (p_tenant, p_chat, p_user, v_last_seq, v_last_seq)
    ON CONFLICT (tenant_id, chat_id, user_id) DO UPDATE SET left_at = NULL, joined_at = now();
    INSERT INTO receipts.membership_periods AS period (tenant_id, chat_id, user_id, after_seq)
    VALUES (p_tenant, p_chat, p_user, v_last_seq)
    ON CONFLICT (tenant_id, chat_id, user_id, after_seq)
        DO UPDATE SET until_seq = NULL, left_at = NULL, joined_at = now();
    RETURN 'joined';
END;
$$;
COMMENT ON FUNCTION receipts.join_chat(text, text, text) IS
    'Adds a member to a group: joined | already_member | direct_chat | chat_not_found. A rejoin starts a new membership period.';

CREATE FUNCTION receipts.leave_chat(p_tenant text, p_chat text, p_user text)
RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_last_seq bigint;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT chat.last_seq INTO v_last_seq FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'chat_not_found';
    END IF;
    UPDATE receipts.chat_members AS member SET left_at = now(), marked_unread = false
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
      AND member.left_at IS NULL;
    IF NOT FOUND THEN
        RETURN 'not_member';
    END IF;
    UPDATE receipts.membership_periods AS period SET until_seq = v_last_seq, left_at = now()
    WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = p_user
      AND period.until_seq IS NULL;
    RETURN 'left';
END;
$$;
COMMENT ON FUNCTION receipts.leave_chat(text, text, text) IS
    'Ends a membership: left | not_member | chat_not_found. The user is no longer waited for on later receipts.';

-- Messages --------------------------------------------------------------------------------

CREATE FUNCTION receipts.send_message(p_tenant text, p_chat text, p_message text, p_sender text, p_body text)
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

-- Unread counts ---------------------------------------------------------------------------
--
-- Everything at or below a member's read watermark (read_seq) is read; above it, the member
-- keeps how many messages they read out of order (reads_above). So a count is arithmetic:
--   messages above the watermark sent while a member - their own among them - reads_above
-- which costs a few index lookups, whatever the length of the history or the number unread.

CREATE FUNCTION receipts.unread_count(p_tenant text, p_chat text, p_user text)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        -- receipts.recipient_seqs - receipts.own_messages - reads_above, written out: this
        -- runs on every read and in every unread.changed event.
        SELECT CASE WHEN member.left_at IS NOT NULL THEN 0 ELSE greatest(
                   (SELECT coalesce(sum(greatest(0, least(coalesce(period.until_seq, chat.last_seq), chat.last_seq)
                                                    - greatest(period.after_seq, member.read_seq))), 0)
                    FROM receipts.membership_periods AS period
                    WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = p_user)
                   - (SELECT count(*) FROM receipts.messages AS message
                      WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat AND message.sender_id = p_user
                        AND message.seq > member.read_seq AND message.seq <= chat.last_seq)
                   - member.reads_above,
                   CASE WHEN member.marked_unread THEN 1 ELSE 0 END)::integer END
        FROM receipts.chat_members AS member
        JOIN receipts.chats AS chat USING (tenant_id, chat_id)
        WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
    );
END;
$$;
COMMENT ON FUNCTION receipts.unread_count(text, text, text) IS
    'Unread messages of one chat for a user: from others, sent while a member, not read; at least 1 while marked unread. Constant cost: arithmetic on the read watermark.';

CREATE FUNCTION receipts.unread_counts(p_tenant text, p_user text)
RETURNS TABLE (chat_id text, unread_count integer, marked_unread boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    -- receipts.unread_count for every current chat of the user, as one query: a few index
    -- lookups per chat, however long the chats' histories and however much is unread.
    RETURN QUERY
    SELECT counted.chat_id::text, counted.unread_count::integer, counted.marked_unread
    FROM (
        SELECT member.chat_id, member.marked_unread, greatest(
                   (SELECT coalesce(sum(greatest(0, least(coalesce(period.until_seq, chat.last_seq), chat.last_seq)
                                                    - greatest(period.after_seq, member.read_seq))), 0)
                    FROM receipts.membership_periods AS period
                    WHERE period.tenant_id = member.tenant_id AND period.chat_id = member.chat_id
                      AND period.user_id = member.user_id)
                   - (SELECT count(*) FROM receipts.messages AS message
                      WHERE message.tenant_id = member.tenant_id AND message.chat_id = member.chat_id
                        AND message.sender_id = member.user_id
                        AND message.seq > member.read_seq AND message.seq <= chat.last_seq)
                   - member.reads_above,
                   CASE WHEN member.marked_unread THEN 1 ELSE 0 END) AS unread_count
        FROM receipts.chat_members AS member
        JOIN receipts.chats AS chat USING (tenant_id, chat_id)
        WHERE member.tenant_id = p_tenant AND member.user_id = p_user AND member.left_at IS NULL
        OFFSET 0  -- computed once per chat, not again for the filter below
    ) AS counted
    WHERE counted.unread_count > 0 OR counted.marked_unread
    ORDER BY counted.chat_id;
END;
$$;
COMMENT ON FUNCTION receipts.unread_counts(text, text) IS
    'A user''s chats with unread messages or marked unread, with their counts. From psql: SELECT * FROM receipts.unread_counts(''tenant'', ''user'');';

-- Marking ---------------------------------------------------------------------------------
--
-- Each marking is one guarded UPDATE that array_appends the user where it is missing, only
-- on messages of others sent during one of the user's membership periods. Under concurrent
-- readers of one message, each UPDATE re-checks the guard on the newest row version, so no
-- reader is lost and none is added twice. The member row, locked first, serialises one
-- user's markings in one chat, so their watermarks and reads_above stay exact.

CREATE FUNCTION receipts.first_unread_seq(p_tenant text, p_chat text, p_user text, p_after bigint, p_through bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_from bigint;
    v_to bigint;
    v_seq bigint;
BEGIN
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
          AND NOT (p_user = ANY (message.read_by)) AND NOT (p_user = ANY (message.hidden_read_by))
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

CREATE FUNCTION receipts.first_undelivered_seq(p_tenant text, p_chat text, p_user text, p_after bigint, p_through bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_from bigint;
    v_to bigint;
    v_seq bigint;
BEGIN
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
          AND NOT (p_user = ANY (message.delivered_to))
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

CREATE FUNCTION receipts.mark_read(p_tenant text, p_chat text, p_user text, p_message_ids text[], p_up_to text)
RETURNS TABLE (outcome text, marked integer, unread_count integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_read_seq bigint;
    v_last_seq bigint;
    v_visible boolean;
    v_up_to_seq bigint;
    v_marked integer;
    v_new_read_seq bigint;
    v_recipient_of int8multirange;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT member.read_seq, chat.last_seq,
           coalesce((SELECT setting.read_receipts FROM receipts.users AS setting
                     WHERE setting.tenant_id = p_tenant AND setting.user_id = p_user), true),
           receipts.membership_seqs(p_tenant, p_chat, p_user)
    INTO v_read_seq, v_last_seq, v_visible, v_recipient_of
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

    -- Every message this statement could mark has seq <= the chat's last_seq read now.
    -- The watermark moves to just below the first message still unread; what it passes
    -- was read (now or out of order before), so reads_above drops by that many.
    SELECT chat.last_seq, coalesce(receipts.first_unread_seq(p_tenant, p_chat, p_user, v_read_seq, chat.last_seq) - 1, chat.last_seq)
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

CREATE FUNCTION receipts.mark_delivered(p_tenant text, p_chat text, p_user text, p_message_ids text[], p_up_to text)
RETURNS TABLE (outcome text, marked integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_last_seq bigint;
    v_from_seq bigint;
    v_left_at timestamptz;
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
    SELECT greatest(member.delivered_seq, member.read_seq), member.left_at,
           receipts.membership_seqs(p_tenant, p_chat, p_user)
    INTO v_from_seq, v_left_at, v_recipient_of
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
        UPDATE receipts.messages AS message SET
            delivered_to = array_append(message.delivered_to, p_user),
            delivered_at = array_append(message.delivered_at, now())
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
          AND message.message_id = ANY (p_message_ids)
          AND message.sender_id <> p_user
          AND NOT (p_user = ANY (message.delivered_to))
          AND message.seq <@ v_recipient_of;
    ELSE
        UPDATE receipts.messages AS message SET
            delivered_to = array_append(message.delivered_to, p_user),
            delivered_at = array_append(message.delivered_at, now())
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
          AND message.seq > v_from_seq AND message.seq <= v_up_to_seq
          AND message.sender_id <> p_user
          AND NOT (p_user = ANY (message.delivered_to))
          AND message.seq <@ v_recipient_of;
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

CREATE FUNCTION receipts.mark_unread(p_tenant text, p_chat text, p_user text)
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

-- Settings --------------------------------------------------------------------------------

CREATE FUNCTION receipts.set_read_receipts(p_tenant text, p_user text, p_enabled boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    INSERT INTO receipts.users AS setting (tenant_id, user_id, read_receipts)
    VALUES (p_tenant, p_user, p_enabled)
    ON CONFLICT (tenant_id, user_id) DO UPDATE SET read_receipts = p_enabled, updated_at = now();
    RETURN p_enabled;
END;
$$;
COMMENT ON FUNCTION receipts.set_read_receipts(text, text, boolean) IS
    'Turns a user''s read receipts on or off; reads made while off stay hidden for good.';
