-- 0018: receipts move out of the message row into fixed-size chunks of members, so that a
-- read rewrites a small, bounded row whatever the size of the group.
--
-- The problem (issue 15). Every receipt appended to messages.read_by / read_at /
-- delivered_to / delivered_at rewrote the whole message row with its arrays. Once a group
-- has a few hundred members the arrays are TOASTed: each receipt writes a new copy of all
-- of them to the TOAST table, whose old copies only VACUUM reclaims. A message read by
-- every member of a group of N costs O(N^2) bytes. Measured here in psql/pgbench (one group,
-- 50 messages from one member, every other member calling mark_read(all) one after another,
-- one transaction each; this 2-core VM with a debug build running beside it):
--     1,000 members: read-all 10.3 ms in the first tenth of readers, 171 ms in the last
--     (16.6x); receipts.messages grew by 295 MiB (6 KB per receipt).
--
-- The layout. A chat numbers its members as they first join (chats.members_numbered counts
-- them, chat_members.receipt_chunk = number / 32, kept across leave and rejoin). Each message
-- has one row per chunk in receipts.receipt_chunks, keyed (tenant, chat, seq, chunk), with
-- the five arrays of 0001 holding only that chunk's members: at most 32 readers, so a full
-- row (about 1.7 KB with 10-character ids) stays under the TOAST threshold of about 2 KB
-- (longer ids get compressed), and a receipt rewrites one such row, whatever the group. The rows are created, empty, with their message (trigger
-- create_receipt_chunks, for every chunk up to the chat's last numbered member: the
-- recipients of a message are members when it was sent, so no receipt ever needs a chunk
-- row created later). Receipts are then appended exactly as before, with guarded UPDATEs:
--     UPDATE receipt_chunks SET read_by = array_append(read_by, $user), ...
--     WHERE (tenant, chat, seq, chunk) = (..., the reader's chunk) AND NOT ($user = ANY (read_by))
-- A repeat is a no-op; two readers of one chunk row serialise on it and the second re-checks
-- the guard on the first one's version (EvalPlanQual), so neither is lost; readers of
-- different chunks do not even wait for each other. The messages row is no longer written
-- after its insert (fillfactor back to 100; 0004/0009 kept room for receipts).
--
-- Alternatives weighed:
-- * Upserts (INSERT ... ON CONFLICT (key) DO UPDATE SET read_by = array_append(...) WHERE
--   NOT ...), creating a chunk row at its first receipt instead of with the message. An
--   upsert that both inserts and updates rows fires the statement-level INSERT trigger and
--   the UPDATE trigger separately, each with its own transition table, so a read-all would
--   produce two receipt.read events for one request, against the contract (one per request
--   and chat). Creating the rows in a statement of their own before the UPDATE keeps one
--   event but costs every marking a probe per message; creating them with the message
--   costs a send one more row (a few for large groups) and keeps marking one UPDATE.
-- * Counts from the chat_members watermarks (as Matrix/Stream derive "read by X/Y" from read
--   positions): a read still has to record who read when (readBy, recipients' readAt,
--   hidden reads, reads out of order above the watermark), so it does not remove the
--   write; and the message page lists readBy in full anyway. Not needed for the targets.
-- * One row per (message, reader), Zulip's layout: smallest writes, but it gives up the
--   array model (guarded array_append) the product is built on.
-- * Chunk size: 16 and 32 measured alike for reads (see below); 32 halves the rows a page
--   and a send of a large group touch; 64 would pass the TOAST threshold with long ids.
--
-- After (same psql/pgbench run as above, same machine, chunks of 32):
--     1,000 members: read-all 15.2 ms in the first tenth, 13.5 ms in the last (0.89x);
--     receipt_chunks grew by 5.0 MiB (105 bytes per receipt), messages not at all;
--     5,000 members: 18.2 ms and 21.1 ms (1.16x), 23.0 MiB (97 bytes per receipt).
--   (Those times are mostly the commit's WAL flush; PostgreSQL's own work for one read-all of
--   50 at 1,000 members, auto_explain: 3.1 ms, of which 0.5 the 50 row updates and 0.9 the
--   event, whose audience array lists the 1,000 members.) Chunks of 16: 13.1 and 16.4 ms,
--   4.5 MiB. The event log grows by one event per read request as before; its audience
--   column (0003) holds every member, so it grows with the group: 5 KB an event at 1,000
--   members, 18 KB at 5,000 (not changed here).
--
-- Events are as before: record_receipts now fires on receipt_chunks (the same statement
-- trigger, the message id kept on the chunk row for it), one event per statement, chat and
-- user. The messages keep their record_messages_created trigger.
--
-- Existing data: every member gets a number (in the order of their first membership
-- period, then id), every message one row per chunk holding exactly the readers, times,
-- deliveries and hidden reads of its arrays, in their order (a user with no member row, which
-- the guards never allowed, would go to chunk 0 rather than be lost); the totals are
-- checked before the old columns are dropped. The migration runs as the tables' owner with
-- receipts.all_tenants on (0017's rule: the runner sets it), so it sees every tenant's rows;
-- the new table gets forced row-level security and both policies, as 0017 asks of new tables.
--
-- Functions redefined (every one that reads or writes the receipt arrays): put_chat and
-- join_chat (number members), first_unread_seq, first_undelivered_seq, mark_read (0012),
-- mark_read_each (0014), mark_delivered (0002), record_receipts (0011); new:
-- receipt_chunk_of, create_receipt_chunks, receipt_chunks_of (what the service reads). Their
-- planner settings are restated (0013): generic plans for mark_read and mark_delivered,
-- no hash or merge joins in mark_read_each, hash joins only in record_receipts.

-- Member numbers -----------------------------------------------------------------------------

CREATE FUNCTION receipts.receipt_chunk_of(p_member_number integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT p_member_number / 32 $$;
COMMENT ON FUNCTION receipts.receipt_chunk_of(integer) IS
    'The receipt chunk of a chat''s n-th member (0-based): 32 members a chunk.';

ALTER TABLE receipts.chats ADD COLUMN members_numbered integer NOT NULL DEFAULT 0 CHECK (members_numbered >= 0);
COMMENT ON COLUMN receipts.chats.members_numbered IS
    'How many users have ever joined: the next member''s number (its receipt chunk: receipts.receipt_chunk_of).';
ALTER TABLE receipts.chat_members ADD COLUMN receipt_chunk integer NOT NULL DEFAULT 0 CHECK (receipt_chunk >= 0);
COMMENT ON COLUMN receipts.chat_members.receipt_chunk IS
    'Which row of receipts.receipt_chunks holds this member''s receipts of each message; fixed at their first join.';

WITH numbered AS (
    SELECT member.tenant_id, member.chat_id, member.user_id,
           (row_number() OVER (PARTITION BY member.tenant_id, member.chat_id
                               ORDER BY first_period.after_seq, member.user_id) - 1)::integer AS number
    FROM receipts.chat_members AS member
    LEFT JOIN LATERAL (
        SELECT min(period.after_seq) AS after_seq FROM receipts.membership_periods AS period
        WHERE period.tenant_id = member.tenant_id AND period.chat_id = member.chat_id AND period.user_id = member.user_id
    ) AS first_period ON true
)
UPDATE receipts.chat_members AS member SET receipt_chunk = receipts.receipt_chunk_of(numbered.number)
FROM numbered
WHERE member.tenant_id = numbered.tenant_id AND member.chat_id = numbered.chat_id AND member.user_id = numbered.user_id
  AND member.receipt_chunk <> receipts.receipt_chunk_of(numbered.number);
UPDATE receipts.chats AS chat SET members_numbered = counted.members
FROM (SELECT member.tenant_id, member.chat_id, count(*)::integer AS members
      FROM receipts.chat_members AS member GROUP BY member.tenant_id, member.chat_id) AS counted
WHERE chat.tenant_id = counted.tenant_id AND chat.chat_id = counted.chat_id;

-- The chunks ---------------------------------------------------------------------------------

CREATE TABLE receipts.receipt_chunks (
    tenant_id      receipts.identifier NOT NULL,
    chat_id        receipts.identifier NOT NULL,
    seq            bigint      NOT NULL,
    chunk          integer     NOT NULL CHECK (chunk >= 0),
    message_id     receipts.identifier NOT NULL,
    delivered_to   text[] COLLATE "C"      NOT NULL DEFAULT '{}',
    delivered_at   timestamptz[] NOT NULL DEFAULT '{}',
    read_by        text[] COLLATE "C"      NOT NULL DEFAULT '{}',
    read_at        timestamptz[] NOT NULL DEFAULT '{}',
    hidden_read_by text[] COLLATE "C"      NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, chat_id, seq, chunk),
    FOREIGN KEY (tenant_id, chat_id, seq) REFERENCES receipts.messages (tenant_id, chat_id, seq) ON DELETE CASCADE,
    CHECK (cardinality(delivered_to) = cardinality(delivered_at)),
    CHECK (cardinality(read_by) = cardinality(read_at))
) WITH (fillfactor = 70);
COMMENT ON TABLE receipts.receipt_chunks IS
    'A message''s receipts, one row per chunk of 32 chat members (chat_members.receipt_chunk), created empty with the message; the arrays only grow, through guarded array_append statements.';
COMMENT ON COLUMN receipts.receipt_chunks.message_id IS 'The message''s id, for the events (the key is its seq).';
COMMENT ON COLUMN receipts.receipt_chunks.delivered_to IS 'Members of this chunk the message reached (a read implies delivery).';
COMMENT ON COLUMN receipts.receipt_chunks.delivered_at IS 'When each user of delivered_to got it (same positions).';
COMMENT ON COLUMN receipts.receipt_chunks.read_by IS 'Members of this chunk who read it, visibly.';
COMMENT ON COLUMN receipts.receipt_chunks.read_at IS 'When each user of read_by read it (same positions).';
COMMENT ON COLUMN receipts.receipt_chunks.hidden_read_by IS 'Members of this chunk who read it with read receipts off: read for them, shown to nobody.';

ALTER TABLE receipts.receipt_chunks ENABLE ROW LEVEL SECURITY;
ALTER TABLE receipts.receipt_chunks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON receipts.receipt_chunks
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));
CREATE POLICY all_tenants_maintenance ON receipts.receipt_chunks TO receipts_maintenance
    USING ((SELECT receipts.works_across_tenants()))
    WITH CHECK ((SELECT receipts.works_across_tenants()));
COMMENT ON POLICY all_tenants_maintenance ON receipts.receipt_chunks IS
    'Members of receipts_maintenance see every tenant while receipts.all_tenants is on (migrations, SECURITY DEFINER functions, operators); see migration 0017.';
GRANT SELECT, INSERT, UPDATE, DELETE ON receipts.receipt_chunks TO receipts_service;

-- Existing receipts, chunk by chunk, in their order; every chunk up to the chat's last member.
-- Each entry of the arrays goes to its user's chunk (hash joins over all of them at once).
INSERT INTO receipts.receipt_chunks
    (tenant_id, chat_id, seq, chunk, message_id, delivered_to, delivered_at, read_by, read_at, hidden_read_by)
SELECT message.tenant_id, message.chat_id, message.seq, chunk.chunk, message.message_id,
       coalesce(filled.delivered_to, '{}'), coalesce(filled.delivered_at, '{}'),
       coalesce(filled.read_by, '{}'), coalesce(filled.read_at, '{}'), coalesce(filled.hidden_read_by, '{}')
FROM receipts.messages AS message
JOIN receipts.chats AS chat ON chat.tenant_id = message.tenant_id AND chat.chat_id = message.chat_id
CROSS JOIN LATERAL generate_series(0, receipts.receipt_chunk_of(greatest(chat.members_numbered - 1, 0))) AS chunk(chunk)
LEFT JOIN (
    SELECT entry.tenant_id, entry.chat_id, entry.seq, coalesce(member.receipt_chunk, 0) AS chunk,
           array_agg(entry.user_id ORDER BY entry.position) FILTER (WHERE entry.kind = 'delivered') AS delivered_to,
           array_agg(entry.at ORDER BY entry.position) FILTER (WHERE entry.kind = 'delivered') AS delivered_at,
           array_agg(entry.user_id ORDER BY entry.position) FILTER (WHERE entry.kind = 'read') AS read_by,
           array_agg(entry.at ORDER BY entry.position) FILTER (WHERE entry.kind = 'read') AS read_at,
           array_agg(entry.user_id ORDER BY entry.position) FILTER (WHERE entry.kind = 'hidden') AS hidden_read_by
    FROM (
        SELECT old.tenant_id, old.chat_id, old.seq, 'delivered' AS kind, delivered.user_id, delivered.at, delivered.position
        FROM receipts.messages AS old, unnest(old.delivered_to, old.delivered_at) WITH ORDINALITY AS delivered(user_id, at, position)
        UNION ALL
        SELECT old.tenant_id, old.chat_id, old.seq, 'read', read.user_id, read.at, read.position
        FROM receipts.messages AS old, unnest(old.read_by, old.read_at) WITH ORDINALITY AS read(user_id, at, position)
        UNION ALL
        SELECT old.tenant_id, old.chat_id, old.seq, 'hidden', hidden.user_id, NULL, hidden.position
        FROM receipts.messages AS old, unnest(old.hidden_read_by) WITH ORDINALITY AS hidden(user_id, position)
    ) AS entry
    LEFT JOIN receipts.chat_members AS member
        ON member.tenant_id = entry.tenant_id AND member.chat_id = entry.chat_id AND member.user_id = entry.user_id
    GROUP BY entry.tenant_id, entry.chat_id, entry.seq, coalesce(member.receipt_chunk, 0)
) AS filled ON filled.tenant_id = message.tenant_id AND filled.chat_id = message.chat_id AND filled.seq = message.seq
           AND filled.chunk = chunk.chunk
ORDER BY message.tenant_id, message.chat_id, message.seq, chunk.chunk;

-- Nothing lost: as many receipts of each kind in the chunks as in the arrays.
DO $$
DECLARE
    v_before bigint[];
    v_after bigint[];
BEGIN
    SELECT ARRAY[count(*), coalesce(sum(cardinality(message.delivered_to)), 0), coalesce(sum(cardinality(message.read_by)), 0),
                 coalesce(sum(cardinality(message.hidden_read_by)), 0)]
    INTO v_before FROM receipts.messages AS message;
    SELECT ARRAY[count(DISTINCT (receipt.tenant_id, receipt.chat_id, receipt.seq)), coalesce(sum(cardinality(receipt.delivered_to)), 0),
                 coalesce(sum(cardinality(receipt.read_by)), 0), coalesce(sum(cardinality(receipt.hidden_read_by)), 0)]
    INTO v_after FROM receipts.receipt_chunks AS receipt;
    IF v_before <> v_after THEN
        RAISE EXCEPTION '0018: messages, deliveries, reads, hidden reads were % in the arrays and % in the chunks', v_before, v_after;
    END IF;
END;
$$;

ALTER TABLE receipts.messages
    DROP COLUMN delivered_to, DROP COLUMN delivered_at, DROP COLUMN read_by, DROP COLUMN read_at, DROP COLUMN hidden_read_by;
COMMENT ON TABLE receipts.messages IS 'Messages; their receipts are in receipts.receipt_chunks. A row is not written again after its insert.';
-- Rows are no longer rewritten by receipts: no room to keep on their pages (0004, 0009).
ALTER TABLE receipts.messages SET (fillfactor = 100);

-- Chunk rows come with their message: every chunk up to the chat's last numbered member (the
-- chat row is locked by every send and join, so the number cannot move meanwhile).
CREATE FUNCTION receipts.create_receipt_chunks() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO receipts.receipt_chunks (tenant_id, chat_id, seq, chunk, message_id)
    SELECT inserted.tenant_id, inserted.chat_id, inserted.seq, chunk.chunk, inserted.message_id
    FROM inserted
    CROSS JOIN LATERAL generate_series(
        0, (SELECT receipts.receipt_chunk_of(greatest(chat.members_numbered - 1, 0)) FROM receipts.chats AS chat
            WHERE chat.tenant_id = inserted.tenant_id AND chat.chat_id = inserted.chat_id)) AS chunk(chunk)
    ORDER BY inserted.tenant_id, inserted.chat_id, inserted.seq, chunk.chunk;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION receipts.create_receipt_chunks() IS 'Trigger: the empty receipt chunk rows of inserted messages.';
CREATE TRIGGER create_receipt_chunks
    AFTER INSERT ON receipts.messages
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION receipts.create_receipt_chunks();

-- receipt.read / receipt.delivered, as in 0011, from the chunk rows a statement appended to.
DROP TRIGGER record_receipts ON receipts.messages;
CREATE OR REPLACE FUNCTION receipts.record_receipts() RETURNS trigger
LANGUAGE plpgsql SET enable_mergejoin = off SET enable_nestloop = off SET enable_hashjoin = on AS $$
BEGIN
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, audience)
    SELECT change.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), change.type,
           change.chat_id, change.user_id, change.message_ids,
           (SELECT coalesce(array_agg(member.user_id ORDER BY member.user_id), '{}')
            FROM receipts.chat_members AS member
            WHERE member.tenant_id = change.tenant_id AND member.chat_id = change.chat_id AND member.left_at IS NULL)
    FROM (
        WITH added AS (
            SELECT after.tenant_id, after.chat_id, after.message_id, after.seq,
                   after.read_by[cardinality(before.read_by) + 1:] AS new_readers,
                   after.delivered_to[cardinality(before.delivered_to) + 1:] AS new_deliveries
            FROM updated_after AS after
            JOIN updated_before AS before USING (tenant_id, chat_id, seq, chunk)
        ),
        receipts AS (
            SELECT tenant_id, chat_id, message_id, seq, unnest(new_readers) AS user_id, 'receipt.read' AS type
            FROM added
            UNION ALL
            SELECT tenant_id, chat_id, message_id, seq, receiver, 'receipt.delivered'
            FROM (SELECT tenant_id, chat_id, message_id, seq, unnest(new_deliveries) AS receiver, new_readers
                  FROM added WHERE new_deliveries <> '{}') AS delivered
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
COMMENT ON FUNCTION receipts.record_receipts() IS 'Trigger: receipt.read / receipt.delivered events for what a statement appended to receipt chunks.';
CREATE TRIGGER record_receipts
    AFTER UPDATE ON receipts.receipt_chunks
    REFERENCING OLD TABLE AS updated_before NEW TABLE AS updated_after
    FOR EACH STATEMENT EXECUTE FUNCTION receipts.record_receipts();

-- What the service reads ---------------------------------------------------------------------

CREATE FUNCTION receipts.receipt_chunks_of(p_tenant text, p_chat text, p_from_seq bigint, p_through_seq bigint)
RETURNS TABLE (seq bigint, delivered_to text[], delivered_at timestamptz[], read_by text[], read_at timestamptz[], hidden_read_by text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT receipt.seq, receipt.delivered_to, receipt.delivered_at, receipt.read_by, receipt.read_at, receipt.hidden_read_by
    FROM receipts.receipt_chunks AS receipt
    WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.seq >= p_from_seq AND receipt.seq <= p_through_seq
    ORDER BY receipt.seq, receipt.chunk;
END;
$$;
COMMENT ON FUNCTION receipts.receipt_chunks_of(text, text, bigint, bigint) IS
    'The receipt chunks of a chat''s messages with p_from_seq <= seq <= p_through_seq, by seq and chunk: a message''s receipts are its chunks'' arrays one after another.';

-- Membership: numbers ------------------------------------------------------------------------

-- put_chat as in 0002, numbering the members in the order given.
CREATE OR REPLACE FUNCTION receipts.put_chat(p_tenant text, p_chat text, p_kind text, p_members text[])
RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_kind text;
    v_current text[];
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    INSERT INTO receipts.chats (tenant_id, chat_id, kind, members_numbered)
    VALUES (p_tenant, p_chat, p_kind, cardinality(p_members))
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        INSERT INTO receipts.chat_members (tenant_id, chat_id, user_id, receipt_chunk)
        SELECT p_tenant, p_chat, member.user_id, receipts.receipt_chunk_of(member.number::integer - 1)
        FROM unnest(p_members) WITH ORDINALITY AS member(user_id, number);
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

-- join_chat as in 0006; a new member takes the chat's next number, a rejoining one keeps theirs.
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
    RETURN 'joined';
END;
$$;

-- First unread / undelivered -----------------------------------------------------------------

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

-- Marking ------------------------------------------------------------------------------------

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
