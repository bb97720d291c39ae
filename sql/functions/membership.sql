-- Chats and their members.
--
-- A user is a recipient of the messages sent during their membership periods (after_seq <
-- seq <= until_seq). Counting works on seq ranges of those periods, never message by
-- message. A chat numbers its members as they first join; the number gives the member's
-- receipt chunk (see receipts.receipt_chunks in the baseline migration).
--
-- Each function takes the tenant first and scopes itself to it with receipts.enter_tenant,
-- so a request is one statement (one round trip, one transaction) and row-level security
-- applies to everything it touches when the caller is receipts_service. Outcomes that are
-- not errors of the database (unknown chat, not a member) come back as an `outcome` text,
-- so the service can answer 404/403/409 without parsing messages.

CREATE OR REPLACE FUNCTION receipts.receipt_chunk_of(p_member_number integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT p_member_number / 32 $$;
COMMENT ON FUNCTION receipts.receipt_chunk_of(integer) IS
    'The receipt chunk of a chat''s n-th member (0-based): 32 members a chunk.';

CREATE OR REPLACE FUNCTION receipts.membership_seqs(p_tenant text, p_chat text, p_user text)
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

-- Whether a message was the user's to receive and read: sent by someone else while the user
-- was a member. While the message is above the start of the user's newest membership period
-- (p_newest_period_after: chat_members.period_after_seq), it was (the common case, no look at
-- the periods). SQL, so that each caller inlines it; no SET clause, not STRICT.
CREATE OR REPLACE FUNCTION receipts.was_recipient(
    p_tenant text, p_chat text, p_user text, p_sender text, p_seq bigint, p_newest_period_after bigint)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_sender <> p_user
           AND CASE WHEN p_seq > p_newest_period_after THEN true
                    ELSE p_seq <@ receipts.membership_seqs(p_tenant, p_chat, p_user) END
$$;
COMMENT ON FUNCTION receipts.was_recipient(text, text, text, text, bigint, bigint) IS
    'Whether a message (its sender and seq) was the user''s to receive and read: from someone else, sent while they were a member.';

-- Whether a message the user was to read (receipts.was_recipient; a row of receipts.mentions,
-- which only such messages have) is still unread by them: above their read watermark
-- (p_read_seq: everything at or below it is read) and not read out of order. A read out of
-- order is looked up in their chunk row (p_chunk) only when they have some (p_reads_above > 0,
-- chat_members.reads_above): the common case costs no lookup. The counts' half of the rule;
-- a marking tests the chunk row it holds instead (receipts.has_read, the same test).
--
-- Used as `CROSS JOIN LATERAL receipts.still_unread(...) AS rule ... WHERE rule.unread`: SQL,
-- one row, no FROM, no WHERE, so that PostgreSQL inlines it and puts the expression itself in
-- the caller's WHERE: the same plan as the condition written out there (the lookup a subplan,
-- run only when p_reads_above > 0). (As a boolean function it would not be inlined, for its
-- subquery; as a filter with a WHERE of its own, each row paid for a join with an empty
-- Result.) No SET clause, not STRICT, STABLE: each would stop the inlining.
CREATE OR REPLACE FUNCTION receipts.still_unread(
    p_tenant text, p_chat text, p_user text, p_chunk integer, p_read_seq bigint, p_reads_above bigint, p_seq bigint)
RETURNS TABLE (unread boolean)
LANGUAGE sql STABLE AS $$
    SELECT p_seq > p_read_seq
           AND (p_reads_above = 0
                OR NOT EXISTS (SELECT FROM receipts.receipt_chunks AS receipt
                               WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat
                                 AND receipt.seq = p_seq AND receipt.chunk = p_chunk
                                 AND receipts.has_read(p_user, receipt.read_by, receipt.hidden_read_by)))
$$;
COMMENT ON FUNCTION receipts.still_unread(text, text, text, integer, bigint, bigint, bigint) IS
    'One row: whether a message the user was to read is still unread by them (above their watermark p_read_seq, not read out of order; looked up in chunk p_chunk only when p_reads_above > 0).';

-- "Unread by this member", the rule every unread list holds to: a message from someone else,
-- sent while they were a member (receipts.was_recipient), and still unread by them
-- (receipts.still_unread). Used as receipts.still_unread is (`CROSS JOIN LATERAL ... AS rule
-- ... WHERE rule.unread`), inlined alike. The count of a chat is arithmetic on the same rule
-- (receipts.messages_to_read less reads_above, sql/views/unread.sql); this is the rule message
-- by message, for what arithmetic cannot give (which threads).
CREATE OR REPLACE FUNCTION receipts.unread_by(
    p_tenant text, p_chat text, p_user text, p_chunk integer, p_read_seq bigint, p_reads_above bigint,
    p_newest_period_after bigint, p_sender text, p_seq bigint)
RETURNS TABLE (unread boolean)
LANGUAGE sql STABLE AS $$
    SELECT receipts.was_recipient(p_tenant, p_chat, p_user, p_sender, p_seq, p_newest_period_after) AND still.unread
    FROM receipts.still_unread(p_tenant, p_chat, p_user, p_chunk, p_read_seq, p_reads_above, p_seq) AS still
$$;
COMMENT ON FUNCTION receipts.unread_by(text, text, text, integer, bigint, bigint, bigint, text, bigint) IS
    'One row: whether a message (its sender and seq) is unread by the member: from someone else, sent while a member, above their watermark, not read out of order.';

-- How many messages with p_after < seq <= p_through were the user's to read: sent while they
-- were a member, less their own. Both pieces of an unread count (sql/views/unread.sql) and
-- what a read's watermark passes (receipts.mark_read_each), written once. While p_after is at
-- or above the start of the user's newest period (p_newest_period_after), every message above
-- it was sent while they were a member: no look at the periods; their own messages are
-- counted only when the range is not empty.
--
-- SQL returning a table, so that PostgreSQL inlines it into the statement that reads it
-- (`(SELECT pending.messages FROM receipts.messages_to_read(...) AS pending)`): the two
-- lookups stay subplans of that statement, run only in the branch that needs them, with no
-- call of a function of their own (as a PL/pgSQL function of the member row, each count
-- was one: about 14 % of the database's CPU under single reads). No SET clause, not STRICT,
-- STABLE: each would stop the inlining.
CREATE OR REPLACE FUNCTION receipts.messages_to_read(
    p_tenant text, p_chat text, p_user text, p_after bigint, p_through bigint, p_newest_period_after bigint)
RETURNS TABLE (messages bigint)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_through <= p_after THEN 0::bigint ELSE
               CASE WHEN p_after >= p_newest_period_after THEN p_through - p_after
                    ELSE (SELECT coalesce(sum(greatest(0, least(coalesce(period.until_seq, p_through), p_through)
                                                        - greatest(period.after_seq, p_after))), 0)::bigint
                          FROM receipts.membership_periods AS period
                          WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = p_user) END
               - (SELECT count(*) FROM receipts.messages AS own
                  WHERE own.tenant_id = p_tenant AND own.chat_id = p_chat AND own.sender_id = p_user
                    AND own.seq > p_after AND own.seq <= p_through) END;
$$;
COMMENT ON FUNCTION receipts.messages_to_read(text, text, text, bigint, bigint, bigint) IS
    'How many messages with p_after < seq <= p_through were the user''s to read (sent while a member, not their own); p_newest_period_after: chat_members.period_after_seq.';

-- A membership change moves the chat on to its next audience version: the user's period
-- begins there (p_joins) or ends there (not p_joins). The caller holds the chat row locked.
CREATE OR REPLACE FUNCTION receipts.change_audience(p_tenant text, p_chat text, p_user text, p_joins boolean)
RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_version integer;
BEGIN
    UPDATE receipts.chats AS chat SET audience_version = chat.audience_version + 1
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat
    RETURNING chat.audience_version INTO v_version;
    IF p_joins THEN
        INSERT INTO receipts.audience_periods (tenant_id, chat_id, user_id, from_version)
        VALUES (p_tenant, p_chat, p_user, v_version);
    ELSE
        UPDATE receipts.audience_periods AS period SET until_version = v_version, left_at = now()
        WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = p_user
          AND period.until_version IS NULL;
    END IF;
END;
$$;
COMMENT ON FUNCTION receipts.change_audience(text, text, text, boolean) IS
    'A join (p_joins) or leave moves the chat to its next audience version, where the user''s audience period begins or ends. The caller holds the chat row.';

-- Members are numbered in the order given.
CREATE OR REPLACE FUNCTION receipts.put_chat(p_tenant text, p_chat text, p_kind text, p_members text[])
RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_kind text;
    v_current text[];
    v_version integer;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    -- A chat of this id that was deleted left its audience periods for the events still in
    -- the log: this one's versions come after them.
    INSERT INTO receipts.chats (tenant_id, chat_id, kind, members_numbered, audience_version)
    VALUES (p_tenant, p_chat, p_kind, cardinality(p_members),
            1 + coalesce((SELECT max(coalesce(period.until_version, period.from_version))
                          FROM receipts.audience_periods AS period
                          WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat), 0))
    ON CONFLICT DO NOTHING
    RETURNING audience_version INTO v_version;
    IF FOUND THEN
        -- A chat of this id was deleted and its messages are not all purged yet: the rest go
        -- now (after the background batch that may hold them), so the new chat starts empty.
        IF EXISTS (SELECT FROM receipts.chat_purges AS purge WHERE purge.tenant_id = p_tenant AND purge.chat_id = p_chat) THEN
            PERFORM FROM receipts.chat_purges AS purge WHERE purge.tenant_id = p_tenant AND purge.chat_id = p_chat FOR UPDATE;
            PERFORM receipts.purge_chat_messages(p_tenant, p_chat, 2147483647);
            DELETE FROM receipts.chat_purges AS purge WHERE purge.tenant_id = p_tenant AND purge.chat_id = p_chat;
        END IF;
        INSERT INTO receipts.chat_members (tenant_id, chat_id, user_id, receipt_chunk)
        SELECT p_tenant, p_chat, member.user_id, receipts.receipt_chunk_of(member.number::integer - 1)
        FROM unnest(p_members) WITH ORDINALITY AS member(user_id, number);
        INSERT INTO receipts.membership_periods (tenant_id, chat_id, user_id, after_seq)
        SELECT p_tenant, p_chat, member, 0 FROM unnest(p_members) AS member;
        INSERT INTO receipts.audience_periods (tenant_id, chat_id, user_id, from_version)
        SELECT p_tenant, p_chat, member, v_version FROM unnest(p_members) AS member;
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

-- A new member takes the chat's next number, a rejoining one keeps theirs; either records where
-- their newest period starts (period_after_seq).
CREATE OR REPLACE FUNCTION receipts.join_chat(p_tenant text, p_chat text, p_user text)
RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_kind text;
    v_last_seq bigint;
    v_numbered integer;
    v_left_at timestamptz;
    v_known boolean;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    -- Locking the chat row orders the join against sends: the new period starts exactly
    -- after the last message sent before it, and the next send has the member's chunk.
    SELECT chat.kind, chat.last_seq, chat.members_numbered INTO v_kind, v_last_seq, v_numbered FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'chat_not_found';
    END IF;
    SELECT true, member.left_at INTO v_known, v_left_at FROM receipts.chat_members AS member
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user;
    IF v_known AND v_left_at IS NULL THEN
        RETURN 'already_member';
    END IF;
    IF v_kind = 'direct' THEN
        RETURN 'direct_chat';
    END IF;
    IF v_known IS NULL THEN
        UPDATE receipts.chats AS chat SET members_numbered = v_numbered + 1
        WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat;
    END IF;
    -- A new member has nothing to read from before they joined: their watermarks start
    -- there. A rejoining member keeps theirs (earlier periods may still hold unread messages).
    INSERT INTO receipts.chat_members AS member
        (tenant_id, chat_id, user_id, read_seq, delivered_seq, period_after_seq, receipt_chunk)
    VALUES (p_tenant, p_chat, p_user, v_last_seq, v_last_seq, v_last_seq, receipts.receipt_chunk_of(v_numbered))
    ON CONFLICT (tenant_id, chat_id, user_id) DO UPDATE SET left_at = NULL, joined_at = now(), period_after_seq = v_last_seq;
    INSERT INTO receipts.membership_periods AS period (tenant_id, chat_id, user_id, after_seq)
    VALUES (p_tenant, p_chat, p_user, v_last_seq)
    ON CONFLICT (tenant_id, chat_id, user_id, after_seq)
        DO UPDATE SET until_seq = NULL, left_at = NULL, joined_at = now();
    PERFORM receipts.change_audience(p_tenant, p_chat, p_user, true);
    RETURN 'joined';
END;
$$;
COMMENT ON FUNCTION receipts.join_chat(text, text, text) IS
    'Adds a member to a group: joined | already_member | direct_chat | chat_not_found. A rejoin starts a new membership period.';

CREATE OR REPLACE FUNCTION receipts.leave_chat(p_tenant text, p_chat text, p_user text)
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
    PERFORM receipts.change_audience(p_tenant, p_chat, p_user, false);
    RETURN 'left';
END;
$$;
COMMENT ON FUNCTION receipts.leave_chat(text, text, text) IS
    'Ends a membership: left | not_member | chat_not_found. The user is no longer waited for on later receipts.';
