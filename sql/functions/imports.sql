-- Bulk imports (sql/migrations/0028_imports.sql says how they are staged and resumed).
--
-- Loading a group of chats is one call of receipts.import_group: set-based statements over
-- the group's staged rows, each a join or an aggregate over the whole group (no statement
-- per message or per receipt), in this order:
--   1. the chats: chat lines judged; new chats made; who may send and read (the roster);
--   2. the messages: judged (chat, id repeated or taken, sender, order, readers), replies
--      judged against their roots, the new ones numbered in the order of their createdAt;
--   3. members and their periods, from when each joined; the messages, mentions, threads;
--   4. the receipts: each message line's readers and deliverers, and the read and delivered
--      lines expanded to every message up to theirs; a read is a delivery too; each
--      (message, user) once, at its earliest time; written as whole chunk rows;
--   5. the members who got receipts settled: watermarks and reads_above, as a read moves them;
--   6. one chat.imported event per chat that changed; errors, counts and progress.
-- The rules are the API's: a line that breaks one is rejected as a whole, with its line
-- number and a code, and changes nothing; the others go in. Everything an answer reads
-- (labels, recipients, unread counts, mentions, threads) is then as if each message had been
-- sent at its createdAt, and read and delivered at the times given, through the API.
--
-- The triggers that write per-message events and a message's empty chunk rows do nothing
-- while receipts.importing is on (this transaction only): an import writes whole chunk rows
-- itself, and one chat.imported event a chat instead of an event per message.

-- The rejection codes of import lines, and what each means (api.md lists them too).
-- Parser (the service): invalid_json, invalid_line (a field missing or of the wrong kind,
-- an id or time that is not valid, a rule of the API's request bodies).
-- Rules (here): chat_not_found, conflict, not_member, not_recipient, read_before_message,
-- out_of_order, thread_not_found, thread_is_reply, message_not_found.

-- Whether an import's transaction is loading (the triggers check it, and do nothing then).
CREATE OR REPLACE FUNCTION receipts.importing() RETURNS boolean
LANGUAGE sql STABLE AS $$ SELECT current_setting('receipts.importing', true) IS NOT DISTINCT FROM 'on' $$;
COMMENT ON FUNCTION receipts.importing() IS
    'Whether this transaction is loading an import: the event and chunk triggers then do nothing (receipts.import_group writes whole chunk rows and one chat.imported a chat).';

-- After the staged rows: the chats the import names, numbered in the order of their first
-- line, with how much each has staged (a line, and each reader and deliverer of a message
-- line, count one); the import's unit count. Called once, in the
-- staging transaction.
CREATE OR REPLACE FUNCTION receipts.plan_import(p_tenant text, p_import text)
RETURNS integer
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    v_units integer;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    INSERT INTO receipts.import_units (tenant_id, import_id, unit, chat_id, rows)
    SELECT p_tenant, p_import, row_number() OVER (ORDER BY min(staged.line))::integer, staged.chat_id,
           sum(1 + coalesce(cardinality(staged.read_by), 0) + coalesce(cardinality(staged.delivered_to), 0))
    FROM receipts.import_rows AS staged
    WHERE staged.tenant_id = p_tenant AND staged.import_id = p_import
    GROUP BY staged.chat_id;
    GET DIAGNOSTICS v_units = ROW_COUNT;
    PERFORM receipts.analyze_import_rows();
    UPDATE receipts.imports AS import SET units = v_units,
        state = CASE WHEN v_units = 0 THEN 'done' ELSE 'running' END,
        finished_at = CASE WHEN v_units = 0 THEN now() END
    WHERE import.tenant_id = p_tenant AND import.import_id = p_import;
    RETURN v_units;
END;
$$;
COMMENT ON FUNCTION receipts.plan_import(text, text) IS
    'Numbers the chats a staged import names in the order of their first line (receipts.import_units) and records how many; an import that names none is done at once.';

-- Statistics of the staged rows, right after staging: until PostgreSQL has them, it takes
-- the table for small and reads all of an import's rows for each group's chats (a group of
-- 10,000 rows: 4.6 s, against 0.23 s after it). As the owner: only the owner may ANALYZE.
CREATE OR REPLACE FUNCTION receipts.analyze_import_rows() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    ANALYZE receipts.import_rows;
END;
$$;
COMMENT ON FUNCTION receipts.analyze_import_rows() IS 'ANALYZE receipts.import_rows (for the service, after staging an import).';
REVOKE ALL ON FUNCTION receipts.analyze_import_rows() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.analyze_import_rows() TO receipts_service;

-- An import's first errors: the parser's (p_lines, p_codes, p_messages) or a group's, kept
-- to the first 100 by line, and the rejected count moved on by p_rejected.
CREATE OR REPLACE FUNCTION receipts.record_import_errors(
    p_tenant text, p_import text, p_lines bigint[], p_codes text[], p_messages text[], p_rejected bigint)
RETURNS void
LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    INSERT INTO receipts.import_errors (tenant_id, import_id, line, code, message)
    SELECT p_tenant, p_import, error.line, error.code, error.message
    FROM unnest(p_lines, p_codes, p_messages) AS error(line, code, message)
    ORDER BY error.line
    LIMIT 100;
    DELETE FROM receipts.import_errors AS error
    WHERE error.tenant_id = p_tenant AND error.import_id = p_import
      AND error.line > (SELECT kept.line FROM receipts.import_errors AS kept
                        WHERE kept.tenant_id = p_tenant AND kept.import_id = p_import
                        ORDER BY kept.line OFFSET 99 LIMIT 1);
    UPDATE receipts.imports AS import SET rejected = import.rejected + p_rejected
    WHERE import.tenant_id = p_tenant AND import.import_id = p_import;
END;
$$;
COMMENT ON FUNCTION receipts.record_import_errors(text, text, bigint[], text[], text[], bigint) IS
    'Adds rejected lines to an import: its first 100 errors by line are kept, and every rejected line counted.';

-- The worker's claim: renews the lease of the import this instance holds, or takes the oldest
-- running one whose lease is free or expired (one at a time: loading is heavy on the database,
-- and paced); with p_tenant and p_import, only that one (`receiptsd import` loads its own).
-- As the owner, beyond row-level security, to find imports of any tenant; each group runs
-- scoped to its tenant. Also forgets imports finished 30 days ago.
CREATE OR REPLACE FUNCTION receipts.claim_import(p_owner text, p_lease interval, p_tenant text DEFAULT NULL, p_import text DEFAULT NULL)
RETURNS TABLE (tenant_id text, import_id text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    DELETE FROM receipts.imports AS import WHERE import.state <> 'running' AND import.finished_at < now() - interval '30 days';
    RETURN QUERY
    UPDATE receipts.imports AS import SET lease_owner = p_owner, lease_expires_at = now() + p_lease
    FROM (SELECT free.tenant_id, free.import_id FROM receipts.imports AS free
          WHERE free.state = 'running'
            AND (p_import IS NULL OR (free.tenant_id = p_tenant AND free.import_id = p_import))
            AND NOT EXISTS (SELECT FROM receipts.tenant_erasures AS erasure WHERE erasure.tenant_id = free.tenant_id)
            AND (free.lease_owner = p_owner OR free.lease_expires_at IS NULL OR free.lease_expires_at <= now())
          ORDER BY free.lease_owner IS NOT DISTINCT FROM p_owner DESC, free.created_at
          LIMIT 1
          FOR UPDATE SKIP LOCKED) AS claimed
    WHERE import.tenant_id = claimed.tenant_id AND import.import_id = claimed.import_id
    RETURNING import.tenant_id::text, import.import_id::text;
END;
$$;
COMMENT ON FUNCTION receipts.claim_import(text, interval, text, text) IS
    'Renews or takes the lease of one running import (the one the instance holds, else the oldest free or expired; with p_tenant and p_import, only that one), and returns it; forgets imports finished 30 days ago.';
REVOKE ALL ON FUNCTION receipts.claim_import(text, interval, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.claim_import(text, interval, text, text) TO receipts_service;

-- On a graceful stop: the import an instance holds goes back at once, so that another
-- instance goes on with it at its next look instead of after the lease has run out.
CREATE OR REPLACE FUNCTION receipts.release_imports(p_owner text)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_released integer;
BEGIN
    UPDATE receipts.imports AS import SET lease_owner = NULL, lease_expires_at = NULL WHERE import.lease_owner = p_owner;
    GET DIAGNOSTICS v_released = ROW_COUNT;
    RETURN v_released;
END;
$$;
COMMENT ON FUNCTION receipts.release_imports(text) IS 'Gives back the import leases an instance holds (graceful shutdown).';
REVOKE ALL ON FUNCTION receipts.release_imports(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.release_imports(text) TO receipts_service;

-- A failed import (an error of ours, not a rule of a line: those reject the line): failed,
-- with why, and its staged rows gone.
CREATE OR REPLACE FUNCTION receipts.fail_import(p_tenant text, p_import text, p_failure text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    UPDATE receipts.imports AS import SET state = 'failed', failure = left(p_failure, 256), finished_at = now(),
        lease_owner = NULL, lease_expires_at = NULL
    WHERE import.tenant_id = p_tenant AND import.import_id = p_import AND import.state = 'running';
    PERFORM receipts.drop_staged_import(p_tenant, p_import, NULL);
END;
$$;
COMMENT ON FUNCTION receipts.fail_import(text, text, text) IS 'Ends a running import as failed (why: p_failure) and deletes its staged rows.';

-- Deletes an import's staged rows: of the chats p_chats, or all (null).
CREATE OR REPLACE FUNCTION receipts.drop_staged_import(p_tenant text, p_import text, p_chats text[])
RETURNS void
LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    DELETE FROM receipts.import_rows AS staged
    WHERE staged.tenant_id = p_tenant AND staged.import_id = p_import AND (p_chats IS NULL OR staged.chat_id = ANY (p_chats));
    IF p_chats IS NULL THEN
        DELETE FROM receipts.import_units AS unit WHERE unit.tenant_id = p_tenant AND unit.import_id = p_import;
    END IF;
END;
$$;
COMMENT ON FUNCTION receipts.drop_staged_import(text, text, text[]) IS 'Deletes an import''s staged lines (of the chats named; null: all, and its units).';

-- An import as GET /v1/imports/{id} shows it, with its first errors (oldest line first).
CREATE OR REPLACE FUNCTION receipts.import_state(p_tenant text, p_import text)
RETURNS TABLE (state text, lines bigint, chats bigint, messages bigint, receipts bigint, rejected bigint,
               units integer, next_unit integer, failure text, error_lines bigint[], error_codes text[], error_messages text[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT import.state, import.lines, import.chats_imported, import.messages_imported, import.receipts_imported,
           import.rejected, import.units, import.next_unit, import.failure,
           coalesce(errors.lines, '{}'), coalesce(errors.codes, '{}'), coalesce(errors.messages, '{}')
    FROM receipts.imports AS import
    LEFT JOIN LATERAL (
        SELECT array_agg(error.line ORDER BY error.line) AS lines, array_agg(error.code ORDER BY error.line) AS codes,
               array_agg(error.message ORDER BY error.line) AS messages
        FROM receipts.import_errors AS error
        WHERE error.tenant_id = p_tenant AND error.import_id = p_import
    ) AS errors ON true
    WHERE import.tenant_id = p_tenant AND import.import_id = p_import;
END;
$$;
COMMENT ON FUNCTION receipts.import_state(text, text) IS
    'An import''s state, counts and first errors (by line). From psql: SELECT * FROM receipts.import_state(''tenant'', ''import'');';

-- Loads the next group of an import's chats (see the top of this file): the units from
-- imports.next_unit whose staged rows add up to p_max_rows (one unit at least, 10,000 at
-- most), for the holder of the import's lease only (not_holder otherwise), renewing it.
-- Returns loaded, or done after the last group (the staged rows are gone then), with the
-- next unit and the import's unit count.
--
-- Locks: the group's chats (in chat order, as sends take them), then their member rows (in
-- (chat, user) order, as reads take them), before any chunk row: a send or read of one of
-- these chats waits for the group to commit, and none can hold a row the group needs while
-- waiting for one it holds.
--
-- Plans: the statements are joins and aggregates over the whole group, left to the planner
-- (hash joins, sorts), with the temporary tables indexed and analyzed as they are filled:
-- unlike the API's functions, which must plan a single read and a read-all alike, each
-- statement here runs once per group, at its size. The rules' checks in CASE branches are
-- subqueries run per row, so each looks its temporary table up by an index (without one, a
-- group of 50,000 messages scanned the roster once per message: minutes).
CREATE OR REPLACE FUNCTION receipts.import_group(
    p_tenant text, p_import text, p_owner text, p_lease interval, p_max_rows bigint)
RETURNS TABLE (outcome text, next_unit integer, units integer)
LANGUAGE plpgsql SET jit = off SET work_mem = '64MB' AS $$
#variable_conflict use_column
DECLARE
    v_next integer;
    v_units integer;
    v_through integer;
    v_chats text[];
    v_chat text;
    v_new_chats bigint;
    v_messages bigint;
    v_receipts bigint;
    v_nested_loops text;
    v_plan_cache_mode text;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT import.next_unit, import.units INTO v_next, v_units
    FROM receipts.imports AS import
    WHERE import.tenant_id = p_tenant AND import.import_id = p_import AND import.state = 'running'
      AND import.lease_owner = p_owner
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_holder', NULL::integer, NULL::integer;
        RETURN;
    END IF;
    PERFORM set_config('receipts.importing', 'on', true);
    -- The foreign keys of the rows the group writes are checked at the end (see there).
    SET CONSTRAINTS receipts.receipt_chunks_tenant_id_chat_id_seq_fkey, receipts.mentions_tenant_id_chat_id_seq_fkey,
        receipts.threads_tenant_id_chat_id_root_seq_fkey, receipts.chat_members_tenant_id_chat_id_fkey,
        receipts.membership_periods_tenant_id_chat_id_user_id_fkey DEFERRED;

    -- The group, and its locks.
    SELECT coalesce(max(sized.unit), v_next) INTO v_through
    FROM (SELECT unit.unit, sum(unit.rows) OVER (ORDER BY unit.unit) AS total
          FROM receipts.import_units AS unit
          WHERE unit.tenant_id = p_tenant AND unit.import_id = p_import
            AND unit.unit >= v_next AND unit.unit < v_next + 10000) AS sized
    WHERE sized.total <= p_max_rows;
    SELECT coalesce(array_agg(unit.chat_id::text ORDER BY unit.chat_id), '{}') INTO v_chats
    FROM receipts.import_units AS unit
    WHERE unit.tenant_id = p_tenant AND unit.import_id = p_import AND unit.unit BETWEEN v_next AND v_through;
    PERFORM FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = ANY (v_chats)
    ORDER BY chat.chat_id
    FOR UPDATE;
    PERFORM FROM receipts.chat_members AS member
    WHERE member.tenant_id = p_tenant AND member.chat_id = ANY (v_chats)
    ORDER BY member.chat_id, member.user_id
    FOR UPDATE;

    DROP TABLE IF EXISTS pg_temp.import_group_chats, pg_temp.import_chat_lines, pg_temp.import_roster,
        pg_temp.import_group_messages, pg_temp.import_group_entries, pg_temp.import_group_positions,
        pg_temp.import_group_reads, pg_temp.import_group_members, pg_temp.import_group_touched, pg_temp.import_group_scanned, pg_temp.import_group_new;

    ---- 1. The chats. ----------------------------------------------------------------------
    -- Each chat of the group as it was: existed, its last seq and the time of its newest
    -- message (new messages must not come before it), its kind and current members. Looked
    -- up only for a chat that was there: until the statistics know an importing tenant,
    -- PostgreSQL may walk all of its rows for each lookup (1.3 s of a group of 600 new chats).
    CREATE TEMP TABLE import_group_chats ON COMMIT DROP AS
    SELECT named.chat_id, chat.chat_id IS NOT NULL AS existed, coalesce(chat.last_seq, 0) AS last_seq, chat.kind,
           CASE WHEN chat.chat_id IS NOT NULL THEN
               (SELECT coalesce(array_agg(member.user_id::text ORDER BY member.user_id), '{}')
                FROM receipts.chat_members AS member
                WHERE member.tenant_id = p_tenant AND member.chat_id = named.chat_id AND member.left_at IS NULL) END AS member_set,
           CASE WHEN chat.chat_id IS NOT NULL THEN
               (SELECT newest.created_at FROM receipts.messages AS newest
                WHERE newest.tenant_id = p_tenant AND newest.chat_id = named.chat_id
                ORDER BY newest.seq DESC LIMIT 1) END AS newest_at,
           chat.chat_id IS NOT NULL AS known
    FROM unnest(v_chats) AS named(chat_id)
    LEFT JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = named.chat_id;
    CREATE INDEX ON import_group_chats (chat_id);

    -- The chat lines: the first of a new chat makes it; any other must say what the chat is
    -- (its kind and current members), or it is a conflict.
    CREATE TEMP TABLE import_chat_lines ON COMMIT DROP AS
    SELECT staged.line, staged.chat_id, staged.chat_kind AS kind, staged.members, staged.joined_at, staged.created_at,
           ARRAY(SELECT DISTINCT member FROM unnest(staged.members) AS member ORDER BY member) AS member_set,
           row_number() OVER (PARTITION BY staged.chat_id ORDER BY staged.line) = 1 AS first,
           NULL::text AS code
    FROM receipts.import_rows AS staged
    WHERE staged.tenant_id = p_tenant AND staged.import_id = p_import AND staged.chat_id = ANY (v_chats)
      AND staged.kind = 'c';
    UPDATE import_chat_lines AS line SET code = 'conflict'
    FROM import_group_chats AS chat
    WHERE chat.chat_id = line.chat_id
      AND CASE WHEN chat.existed THEN line.kind <> chat.kind OR line.member_set <> chat.member_set
               ELSE NOT line.first AND EXISTS (SELECT FROM import_chat_lines AS first
                                               WHERE first.chat_id = line.chat_id AND first.first
                                                 AND (first.kind <> line.kind OR first.member_set <> line.member_set)) END;

    -- New chats. One of this id that was deleted and is not purged yet goes first (as
    -- receipts.put_chat does it), and its audience versions are carried on.
    FOR v_chat IN SELECT line.chat_id FROM import_chat_lines AS line
                  JOIN import_group_chats AS chat ON chat.chat_id = line.chat_id AND NOT chat.existed
                  WHERE line.first
                    AND EXISTS (SELECT FROM receipts.chat_purges AS purge
                                WHERE purge.tenant_id = p_tenant AND purge.chat_id = line.chat_id) LOOP
        PERFORM FROM receipts.chat_purges AS purge WHERE purge.tenant_id = p_tenant AND purge.chat_id = v_chat FOR UPDATE;
        PERFORM receipts.purge_chat_messages(p_tenant, v_chat, 2147483647);
        DELETE FROM receipts.chat_purges AS purge WHERE purge.tenant_id = p_tenant AND purge.chat_id = v_chat;
    END LOOP;
    INSERT INTO receipts.chats (tenant_id, chat_id, kind, members_numbered, audience_version, created_at)
    SELECT p_tenant, line.chat_id, line.kind, cardinality(line.members),
           1 + coalesce((SELECT max(coalesce(period.until_version, period.from_version))
                         FROM receipts.audience_periods AS period
                         WHERE period.tenant_id = p_tenant AND period.chat_id = line.chat_id), 0),
           coalesce(line.created_at,
                    least((SELECT min(joined) FROM unnest(line.joined_at) AS joined),
                          (SELECT min(staged.created_at) FROM receipts.import_rows AS staged
                           WHERE staged.tenant_id = p_tenant AND staged.import_id = p_import
                             AND staged.chat_id = line.chat_id AND staged.kind = 'm')),
                    now())
    FROM import_chat_lines AS line
    JOIN import_group_chats AS chat ON chat.chat_id = line.chat_id AND NOT chat.existed
    WHERE line.first
    ORDER BY line.chat_id;
    GET DIAGNOSTICS v_new_chats = ROW_COUNT;
    UPDATE import_group_chats AS chat SET known = true
    WHERE NOT chat.existed AND EXISTS (SELECT FROM import_chat_lines AS line WHERE line.chat_id = chat.chat_id);

    -- Who may send and read the group's new messages: a new chat's members from when each
    -- joined (null: from the start), numbered in the order given (their chunks); an existing
    -- chat's current members.
    CREATE TEMP TABLE import_roster ON COMMIT DROP AS
    SELECT line.chat_id, member.user_id, member.joined_at, ((member.number - 1) / 32)::integer AS chunk, true AS fresh
    FROM import_chat_lines AS line
    JOIN import_group_chats AS chat ON chat.chat_id = line.chat_id AND NOT chat.existed
    CROSS JOIN LATERAL unnest(line.members, line.joined_at) WITH ORDINALITY AS member(user_id, joined_at, number)
    WHERE line.first
    UNION ALL
    SELECT member.chat_id, member.user_id, NULL, member.receipt_chunk, false
    FROM receipts.chat_members AS member
    JOIN import_group_chats AS chat ON chat.chat_id = member.chat_id AND chat.existed
    WHERE member.tenant_id = p_tenant AND member.left_at IS NULL;
    CREATE INDEX ON import_roster (chat_id, user_id);
    ANALYZE import_roster;

    ---- 2. The messages. -------------------------------------------------------------------
    -- Each message line, with the message of its id if the chat has one, judged: a message is
    -- its first line (a later line of the same id must say the same, as a repeated send
    -- must: judged below); its chat, its id, its sender, its place in the chat's history.
    CREATE TEMP TABLE import_group_messages ON COMMIT DROP AS
    SELECT staged.line, staged.chat_id, staged.message_id, staged.user_id AS sender_id, staged.body, staged.created_at,
           staged.thread_id, staged.mentions, staged.mentions_all, staged.first,
           existing.seq AS existing_seq, existing.created_at AS existing_at,
           CASE WHEN NOT staged.first THEN NULL
                WHEN NOT chat.known THEN 'chat_not_found'
                WHEN existing.seq IS NOT NULL THEN
                    CASE WHEN existing.sender_id = staged.user_id AND existing.body = staged.body
                              AND existing.thread_id IS NOT DISTINCT FROM staged.thread_id
                              AND existing.mentions_all = staged.mentions_all
                              AND existing.mentions = receipts.named_mentions(
                                  p_tenant, staged.chat_id, staged.user_id, existing.seq,
                                  array_fill(1, ARRAY[cardinality(staged.mentions)]), staged.mentions, 1)
                         THEN NULL ELSE 'conflict' END
                WHEN EXISTS (SELECT FROM receipts.deleted_messages AS deleted
                             WHERE deleted.tenant_id = p_tenant AND deleted.chat_id = staged.chat_id
                               AND deleted.message_id = staged.message_id) THEN 'conflict'
                WHEN sender.user_id IS NULL OR sender.joined_at > staged.created_at THEN 'not_member'
                WHEN chat.existed AND staged.created_at < chat.newest_at THEN 'out_of_order' END AS code,
           NULL::bigint AS seq, NULL::timestamptz AS sent_at
    FROM (SELECT staged.*, row_number() OVER (PARTITION BY staged.chat_id, staged.message_id ORDER BY staged.line) = 1 AS first
          FROM receipts.import_rows AS staged
          WHERE staged.tenant_id = p_tenant AND staged.import_id = p_import AND staged.chat_id = ANY (v_chats)
            AND staged.kind = 'm') AS staged
    JOIN import_group_chats AS chat ON chat.chat_id = staged.chat_id
    LEFT JOIN import_roster AS sender ON sender.chat_id = staged.chat_id AND sender.user_id = staged.user_id
    -- Looked up only in a chat that was there, by the key whatever the statistics (as
    -- receipts.message_by_id explains): a plain join, planned while PostgreSQL took the new
    -- tenant for having no messages, walked all of its messages for each line (96 s a group).
    LEFT JOIN LATERAL (SELECT existing.seq, existing.created_at, existing.sender_id, existing.body, existing.thread_id,
                              existing.mentions_all, existing.mentions
                       FROM receipts.messages AS existing
                       WHERE chat.existed AND existing.tenant_id = p_tenant AND existing.chat_id = staged.chat_id
                         AND existing.message_id >= staged.message_id AND existing.message_id <= staged.message_id
                       ORDER BY existing.message_id
                       LIMIT 1) AS existing ON true;
    CREATE INDEX ON import_group_messages (line);
    CREATE INDEX ON import_group_messages (chat_id, message_id);
    ANALYZE import_group_messages;

    -- The readers and deliverers of message lines (a sender listing themself is passed over,
    -- as a read of one's own message marks nothing).
    -- (unnest in the select list: expanded in place, not a function scan per row).
    CREATE TEMP TABLE import_group_entries ON COMMIT DROP AS
    SELECT entry.line, entry.user_id, entry.read, entry.at
    FROM (SELECT staged.line, staged.user_id AS sender_id, unnest(staged.read_by) AS user_id, true AS read,
                 unnest(staged.read_at) AS at
          FROM receipts.import_rows AS staged
          WHERE staged.tenant_id = p_tenant AND staged.import_id = p_import AND staged.chat_id = ANY (v_chats)
            AND staged.kind = 'm'
          UNION ALL
          SELECT staged.line, staged.user_id, unnest(staged.delivered_to), false, unnest(staged.delivered_at)
          FROM receipts.import_rows AS staged
          WHERE staged.tenant_id = p_tenant AND staged.import_id = p_import AND staged.chat_id = ANY (v_chats)
            AND staged.kind = 'm') AS entry
    WHERE entry.user_id <> entry.sender_id;
    ANALYZE import_group_entries;

    -- A first line's entries: each a member who was to receive the message, never before it
    -- was sent. Only the lines with a bad entry are written.
    UPDATE import_group_messages AS message SET code = judged.code
    FROM (SELECT judged.line, min(judged.code) AS code
          FROM (SELECT entry.line, CASE
                       WHEN coalesce(entry.at, 'infinity') < coalesce(message.existing_at, message.created_at)
                           THEN 'read_before_message'
                       WHEN message.existing_seq IS NULL THEN
                           CASE WHEN roster.user_id IS NULL THEN 'not_member'
                                WHEN roster.joined_at > message.created_at THEN 'not_recipient' END
                       WHEN NOT EXISTS (SELECT FROM receipts.membership_periods AS period
                                        WHERE period.tenant_id = p_tenant AND period.chat_id = message.chat_id
                                          AND period.user_id = entry.user_id) THEN 'not_member'
                       WHEN NOT EXISTS (SELECT FROM receipts.membership_periods AS period
                                        WHERE period.tenant_id = p_tenant AND period.chat_id = message.chat_id
                                          AND period.user_id = entry.user_id AND period.after_seq < message.existing_seq
                                          AND (period.until_seq IS NULL OR period.until_seq >= message.existing_seq))
                           THEN 'not_recipient' END AS code
                FROM import_group_entries AS entry
                JOIN import_group_messages AS message ON message.line = entry.line
                LEFT JOIN import_roster AS roster ON roster.chat_id = message.chat_id AND roster.user_id = entry.user_id
                WHERE message.first AND message.code IS NULL) AS judged
          WHERE judged.code IS NOT NULL
          GROUP BY judged.line) AS judged
    WHERE message.line = judged.line;

    -- Replies: the root is a message of the chat that is no reply, sent before (in this
    -- import, or already there).
    UPDATE import_group_messages AS reply SET code = CASE
            WHEN root.root_seq IS NULL AND root.fresh_line IS NULL THEN 'thread_not_found'
            WHEN root.is_reply THEN 'thread_is_reply' END
    FROM (SELECT candidate.line,
                 existing.seq AS root_seq, fresh.line AS fresh_line,
                 coalesce(existing.thread_id IS NOT NULL, fresh.thread_id IS NOT NULL) AS is_reply
          FROM import_group_messages AS candidate
          LEFT JOIN LATERAL receipts.message_by_id(p_tenant, candidate.chat_id, candidate.thread_id) AS existing ON true
          LEFT JOIN import_group_messages AS fresh
              ON existing.seq IS NULL AND fresh.chat_id = candidate.chat_id AND fresh.message_id = candidate.thread_id
             AND fresh.first AND fresh.code IS NULL
             AND (fresh.created_at, fresh.line) < (candidate.created_at, candidate.line)
          WHERE candidate.first AND candidate.code IS NULL AND candidate.existing_seq IS NULL
            AND candidate.thread_id IS NOT NULL) AS root
    WHERE reply.line = root.line;

    -- A later line of a message: the same content as its first, then the first's fate.
    UPDATE import_group_messages AS later SET code = CASE
            WHEN first.sender_id <> later.sender_id OR first.body <> later.body
                 OR first.thread_id IS DISTINCT FROM later.thread_id OR first.mentions_all <> later.mentions_all
                 OR first.mentions <> later.mentions THEN 'conflict'
            ELSE first.code END
    FROM import_group_messages AS first
    WHERE NOT later.first AND first.first AND first.chat_id = later.chat_id AND first.message_id = later.message_id;

    ---- 3. Members, messages, mentions, threads. ------------------------------------------
    -- A new chat's members, each from the first message sent once they had joined.
    CREATE TEMP TABLE import_group_members ON COMMIT DROP AS
    SELECT roster.chat_id, roster.user_id, roster.chunk, roster.joined_at,
           CASE WHEN roster.joined_at IS NULL THEN 0
                ELSE (SELECT count(*) FROM import_group_messages AS message
                      WHERE message.chat_id = roster.chat_id AND message.first AND message.code IS NULL
                        AND message.existing_seq IS NULL AND message.created_at < roster.joined_at) END AS after_seq
    FROM import_roster AS roster
    WHERE roster.fresh;
    INSERT INTO receipts.chat_members
        (tenant_id, chat_id, user_id, receipt_chunk, joined_at, read_seq, delivered_seq, period_after_seq)
    SELECT p_tenant, member.chat_id, member.user_id, member.chunk, coalesce(member.joined_at, chat.created_at),
           member.after_seq, member.after_seq, member.after_seq
    FROM import_group_members AS member
    JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = member.chat_id
    ORDER BY member.chat_id, member.user_id;
    INSERT INTO receipts.membership_periods (tenant_id, chat_id, user_id, after_seq, joined_at)
    SELECT p_tenant, member.chat_id, member.user_id, member.after_seq, coalesce(member.joined_at, chat.created_at)
    FROM import_group_members AS member
    JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = member.chat_id;
    INSERT INTO receipts.audience_periods (tenant_id, chat_id, user_id, from_version)
    SELECT p_tenant, member.chat_id, member.user_id, chat.audience_version
    FROM import_group_members AS member
    JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = member.chat_id;

    -- The new messages, numbered in the order of their createdAt (then of their lines) after
    -- the chat's last, with whom they mention: the named members of when each was sent, but
    -- its sender (receipts.named_mentions, as a send keeps them); written, and kept for the
    -- steps below (import_group_new).
    CREATE TEMP TABLE import_group_new (
        line bigint, chat_id text, message_id text, seq bigint, sender_id text, created_at timestamptz,
        root_seq bigint, mentions text[], mentions_all boolean, mentions_any boolean) ON COMMIT DROP;
    WITH numbered AS (
        SELECT fresh.line, fresh.chat_id, fresh.message_id, fresh.sender_id, fresh.body, fresh.created_at, fresh.thread_id,
               fresh.mentions, fresh.mentions_all,
               chat.last_seq + row_number() OVER (PARTITION BY fresh.chat_id ORDER BY fresh.created_at, fresh.line) AS seq
        FROM import_group_messages AS fresh
        JOIN import_group_chats AS chat ON chat.chat_id = fresh.chat_id
        WHERE fresh.first AND fresh.code IS NULL AND fresh.existing_seq IS NULL
    ),
    inserted AS (
        INSERT INTO receipts.messages AS message
            (tenant_id, chat_id, message_id, seq, sender_id, body, created_at, mentions, mentions_all, thread_id)
        SELECT p_tenant, numbered.chat_id, numbered.message_id, numbered.seq, numbered.sender_id, numbered.body,
               numbered.created_at,
               CASE WHEN cardinality(numbered.mentions) = 0 THEN '{}'
                    ELSE receipts.named_mentions(p_tenant, numbered.chat_id, numbered.sender_id, numbered.seq,
                                                 array_fill(1, ARRAY[cardinality(numbered.mentions)]), numbered.mentions, 1) END,
               numbered.mentions_all, numbered.thread_id
        FROM numbered
        ORDER BY numbered.chat_id, numbered.seq
        RETURNING message.chat_id, message.seq, message.mentions
    )
    INSERT INTO import_group_new
    SELECT numbered.line, numbered.chat_id, numbered.message_id, numbered.seq, numbered.sender_id, numbered.created_at,
           CASE WHEN numbered.thread_id IS NOT NULL
                THEN coalesce((SELECT existing.seq FROM receipts.message_by_id(p_tenant, numbered.chat_id, numbered.thread_id) AS existing),
                              root.seq) END,
           inserted.mentions, numbered.mentions_all, numbered.mentions_all OR cardinality(numbered.mentions) > 0
    FROM numbered
    JOIN inserted ON inserted.chat_id = numbered.chat_id AND inserted.seq = numbered.seq
    LEFT JOIN numbered AS root ON numbered.thread_id IS NOT NULL AND root.chat_id = numbered.chat_id
                              AND root.message_id = numbered.thread_id;
    CREATE INDEX ON import_group_new (line);
    ANALYZE import_group_new;
    SELECT count(*) INTO v_messages FROM import_group_new;

    -- Every member mentioned gets a row: the named ones, or every member but the sender.
    INSERT INTO receipts.mentions (tenant_id, chat_id, user_id, seq)
    SELECT p_tenant, fresh.chat_id, named.user_id, fresh.seq
    FROM import_group_new AS fresh CROSS JOIN LATERAL unnest(fresh.mentions) AS named(user_id)
    WHERE NOT fresh.mentions_all
    UNION ALL
    SELECT p_tenant, fresh.chat_id, period.user_id, fresh.seq
    FROM import_group_new AS fresh
    JOIN receipts.membership_periods AS period
        ON period.tenant_id = p_tenant AND period.chat_id = fresh.chat_id
       AND period.after_seq < fresh.seq AND (period.until_seq IS NULL OR period.until_seq >= fresh.seq)
       AND period.user_id <> fresh.sender_id
    WHERE fresh.mentions_all;

    -- A reply counts in its root's summary.
    INSERT INTO receipts.threads AS thread (tenant_id, chat_id, root_seq, replies, last_reply_at)
    SELECT p_tenant, reply.chat_id, reply.root_seq, count(*), max(reply.created_at)
    FROM import_group_new AS reply
    WHERE reply.root_seq IS NOT NULL
    GROUP BY reply.chat_id, reply.root_seq
    ORDER BY reply.chat_id, reply.root_seq
    ON CONFLICT (tenant_id, chat_id, root_seq) DO UPDATE
        SET replies = thread.replies + excluded.replies, last_reply_at = greatest(thread.last_reply_at, excluded.last_reply_at);

    UPDATE receipts.chats AS chat SET
        last_seq = chat.last_seq + added.messages,
        last_reply_seq = greatest(chat.last_reply_seq, coalesce(added.last_reply, 0)),
        last_mention_seq = greatest(chat.last_mention_seq, coalesce(added.last_mention, 0))
    FROM (SELECT fresh.chat_id, count(*) AS messages,
                 max(fresh.seq) FILTER (WHERE fresh.root_seq IS NOT NULL) AS last_reply,
                 max(fresh.seq) FILTER (WHERE fresh.mentions_any) AS last_mention
          FROM import_group_new AS fresh
          GROUP BY fresh.chat_id) AS added
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = added.chat_id;

    -- Every other accepted line now knows its message's seq and time (a new message's are in
    -- import_group_new): one that was there, or, for a later line, its first's.
    UPDATE import_group_messages AS message SET seq = message.existing_seq, sent_at = message.existing_at
    WHERE message.first AND message.code IS NULL AND message.existing_seq IS NOT NULL;
    UPDATE import_group_messages AS later SET seq = coalesce(fresh.seq, first.seq), sent_at = coalesce(fresh.created_at, first.sent_at)
    FROM import_group_messages AS first
    LEFT JOIN import_group_new AS fresh ON fresh.line = first.line
    WHERE NOT later.first AND later.code IS NULL AND first.first
      AND first.chat_id = later.chat_id AND first.message_id = later.message_id;

    -- A later line's own entries, against its message.
    UPDATE import_group_messages AS message SET code = judged.code
    FROM (SELECT entry.line, min(CASE
              WHEN coalesce(entry.at, 'infinity') < message.sent_at THEN 'read_before_message'
              WHEN NOT EXISTS (SELECT FROM receipts.membership_periods AS period
                               WHERE period.tenant_id = p_tenant AND period.chat_id = message.chat_id
                                 AND period.user_id = entry.user_id) THEN 'not_member'
              WHEN NOT EXISTS (SELECT FROM receipts.membership_periods AS period
                               WHERE period.tenant_id = p_tenant AND period.chat_id = message.chat_id
                                 AND period.user_id = entry.user_id AND period.after_seq < message.seq
                                 AND (period.until_seq IS NULL OR period.until_seq >= message.seq)) THEN 'not_recipient'
              END) AS code
          FROM import_group_entries AS entry
          JOIN import_group_messages AS message ON message.line = entry.line
          WHERE NOT message.first AND message.code IS NULL
          GROUP BY entry.line) AS judged
    WHERE message.line = judged.line AND judged.code IS NOT NULL;

    ---- 4. The receipts. -------------------------------------------------------------------
    -- Read and delivered lines: a current member, a message of the chat, not before it.
    CREATE TEMP TABLE import_group_positions ON COMMIT DROP AS
    SELECT staged.line, staged.chat_id, staged.user_id, staged.read, staged.at,
           target.seq, target.created_at,
           CASE WHEN NOT chat.known THEN 'chat_not_found'
                WHEN NOT EXISTS (SELECT FROM receipts.chat_members AS member
                                 WHERE member.tenant_id = p_tenant AND member.chat_id = staged.chat_id
                                   AND member.user_id = staged.user_id AND member.left_at IS NULL) THEN 'not_member'
                WHEN target.seq IS NULL THEN 'message_not_found'
                WHEN coalesce(staged.at, 'infinity') < target.created_at THEN 'read_before_message' END AS code
    FROM receipts.import_rows AS staged
    JOIN import_group_chats AS chat ON chat.chat_id = staged.chat_id
    LEFT JOIN LATERAL (SELECT message.seq, message.created_at FROM receipts.messages AS message
                       WHERE message.tenant_id = p_tenant AND message.chat_id = staged.chat_id
                         AND message.message_id >= staged.message_id AND message.message_id <= staged.message_id
                       ORDER BY message.message_id
                       LIMIT 1) AS target ON true
    WHERE staged.tenant_id = p_tenant AND staged.import_id = p_import AND staged.chat_id = ANY (v_chats)
      AND staged.kind = 'p';

    -- Every (message, user) the lines give, with when it was first read (null: not read)
    -- and first delivered (null: not delivered); a read is a delivery too, at its time. A
    -- message line's entry at null is when the message was sent; a position's, when the
    -- message it names was. A position covers every message up to its own that was the
    -- user's to read (receipts.was_recipient) above their watermark.
    CREATE TEMP TABLE import_group_reads ON COMMIT DROP AS
    SELECT given.chat_id, given.seq, given.user_id,
           min(given.at) FILTER (WHERE given.read) AS read_at, min(given.at) AS delivered_at
    FROM (
        SELECT message.chat_id, coalesce(fresh.seq, message.seq) AS seq, entry.user_id, entry.read,
               coalesce(entry.at, fresh.created_at, message.sent_at) AS at
        FROM import_group_entries AS entry
        JOIN import_group_messages AS message ON message.line = entry.line
        LEFT JOIN import_group_new AS fresh ON fresh.line = entry.line
        WHERE message.code IS NULL AND entry.user_id <> message.sender_id
        UNION ALL
        SELECT position.chat_id, message.seq, position.user_id, position.read, coalesce(position.at, position.created_at)
        FROM import_group_positions AS position
        JOIN receipts.chat_members AS member
            ON member.tenant_id = p_tenant AND member.chat_id = position.chat_id AND member.user_id = position.user_id
        JOIN receipts.messages AS message
            ON message.tenant_id = p_tenant AND message.chat_id = position.chat_id
           AND message.seq > member.read_seq AND message.seq <= position.seq
        WHERE position.code IS NULL
          AND receipts.was_recipient(p_tenant, position.chat_id, position.user_id, message.sender_id, message.seq,
                                     member.period_after_seq)
    ) AS given
    GROUP BY given.chat_id, given.seq, given.user_id;
    ANALYZE import_group_reads;

    -- What the chunk rows of messages that were there already record stays as it is.
    IF EXISTS (SELECT FROM import_group_chats AS chat WHERE chat.last_seq > 0) THEN
        UPDATE import_group_reads AS given SET
            read_at = CASE WHEN receipts.has_read(given.user_id, receipt.read_by, receipt.hidden_read_by)
                           THEN NULL ELSE given.read_at END,
            delivered_at = CASE WHEN given.user_id = ANY (receipt.delivered_to) THEN NULL ELSE given.delivered_at END
        FROM import_group_chats AS chat, receipts.chat_members AS member, receipts.receipt_chunks AS receipt
        WHERE chat.chat_id = given.chat_id AND given.seq <= chat.last_seq
          AND member.tenant_id = p_tenant AND member.chat_id = given.chat_id AND member.user_id = given.user_id
          AND receipt.tenant_id = p_tenant AND receipt.chat_id = given.chat_id AND receipt.seq = given.seq
          AND receipt.chunk = member.receipt_chunk;
        DELETE FROM import_group_reads AS given WHERE given.read_at IS NULL AND given.delivered_at IS NULL;
    END IF;
    SELECT count(given.read_at) + count(given.delivered_at) INTO v_receipts FROM import_group_reads AS given;

    -- The chunk rows: a new message's, whole (every chunk up to the chat's last numbered
    -- member, as a send makes them), with its readers and deliverers in the order of their
    -- times; a message that was there gets its new ones appended. A reader whose receipts
    -- are off is recorded hidden (receipts.users.read_receipts), as a read of theirs is. The
    -- rows are sorted once by when they were read, and the read arrays of a chunk row take
    -- them in that order (so the users and times of read_by and read_at stay side by side);
    -- the delivered arrays sort theirs by when they were delivered (the same order, but for
    -- a delivery before its read).
    v_nested_loops := current_setting('enable_nestloop');
    PERFORM set_config('enable_nestloop', 'off', true);
    WITH ordered AS (
        SELECT given.chat_id, given.seq, member.receipt_chunk AS chunk, given.user_id, given.read_at, given.delivered_at,
               coalesce(setting.read_receipts, true) AS visible
        FROM import_group_reads AS given
        JOIN receipts.chat_members AS member
            ON member.tenant_id = p_tenant AND member.chat_id = ANY (v_chats)
           AND member.chat_id = given.chat_id AND member.user_id = given.user_id
        LEFT JOIN receipts.users AS setting ON setting.tenant_id = p_tenant AND setting.user_id = given.user_id
        ORDER BY given.chat_id, given.seq, member.receipt_chunk, given.read_at, given.user_id
    ),
    per_chunk AS (
        SELECT ordered.chat_id, ordered.seq, ordered.chunk,
               coalesce(array_agg(ordered.user_id) FILTER (WHERE ordered.read_at IS NOT NULL AND ordered.visible), '{}') AS read_by,
               coalesce(array_agg(ordered.read_at) FILTER (WHERE ordered.read_at IS NOT NULL AND ordered.visible), '{}') AS read_at,
               coalesce(array_agg(ordered.user_id) FILTER (WHERE ordered.read_at IS NOT NULL AND NOT ordered.visible), '{}')
                   AS hidden_read_by,
               coalesce(array_agg(ordered.user_id ORDER BY ordered.delivered_at, ordered.user_id)
                            FILTER (WHERE ordered.delivered_at IS NOT NULL), '{}') AS delivered_to,
               coalesce(array_agg(ordered.delivered_at ORDER BY ordered.delivered_at, ordered.user_id)
                            FILTER (WHERE ordered.delivered_at IS NOT NULL), '{}') AS delivered_at
        FROM ordered
        GROUP BY ordered.chat_id, ordered.seq, ordered.chunk
    ),
    fresh AS (
        INSERT INTO receipts.receipt_chunks
            (tenant_id, chat_id, seq, chunk, message_id, read_by, read_at, hidden_read_by, delivered_to, delivered_at)
        SELECT p_tenant, message.chat_id, message.seq, chunk.chunk, message.message_id,
               coalesce(given.read_by, '{}'), coalesce(given.read_at, '{}'), coalesce(given.hidden_read_by, '{}'),
               coalesce(given.delivered_to, '{}'), coalesce(given.delivered_at, '{}')
        FROM import_group_new AS message
        JOIN receipts.chats AS chat
            ON chat.tenant_id = p_tenant AND chat.chat_id = ANY (v_chats) AND chat.chat_id = message.chat_id
        CROSS JOIN LATERAL generate_series(0, receipts.receipt_chunk_of(greatest(chat.members_numbered - 1, 0))) AS chunk(chunk)
        LEFT JOIN per_chunk AS given
            ON given.chat_id = message.chat_id AND given.seq = message.seq AND given.chunk = chunk.chunk
        ORDER BY message.chat_id, message.seq, chunk.chunk
    )
    UPDATE receipts.receipt_chunks AS receipt SET
        read_by = receipt.read_by || given.read_by, read_at = receipt.read_at || given.read_at,
        hidden_read_by = receipt.hidden_read_by || given.hidden_read_by,
        delivered_to = receipt.delivered_to || given.delivered_to, delivered_at = receipt.delivered_at || given.delivered_at
    FROM per_chunk AS given
    JOIN import_group_chats AS chat ON chat.chat_id = given.chat_id
    WHERE given.seq <= chat.last_seq
      AND receipt.tenant_id = p_tenant AND receipt.chat_id = ANY (v_chats)
      AND receipt.chat_id = given.chat_id AND receipt.seq = given.seq AND receipt.chunk = given.chunk;

    ---- 5. The members who got receipts, settled as a read or delivery settles them. -------
    -- Their read watermark moves to just below the first message they were to read and did
    -- not (else the chat's last), reads_above counts what they read above it, the delivery
    -- watermark likewise; a read clears a chat marked unread. First what each one's chunk
    -- rows say of every message above their watermark that was theirs, by hash joins of the
    -- group's rows (looked up by chat), nested loops off: the planner knows nothing of a new
    -- tenant's rows and took them for a few, looping over a chat's chunk rows for each
    -- message (8 s of a group of 10,000 messages, instead of a tenth of one).
    CREATE TEMP TABLE import_group_touched ON COMMIT DROP AS
    SELECT given.chat_id, given.user_id, bool_or(given.read_at IS NOT NULL) AS read_any, max(given.read_at) AS read_at
    FROM import_group_reads AS given
    GROUP BY given.chat_id, given.user_id;
    ANALYZE import_group_touched;
    CREATE TEMP TABLE import_group_scanned ON COMMIT DROP AS
    SELECT member.chat_id::text AS chat_id, member.user_id::text AS user_id, message.seq,
           receipts.has_read(member.user_id, receipt.read_by, receipt.hidden_read_by) AS read,
           member.user_id = ANY (receipt.delivered_to) AS delivered
    FROM import_group_touched AS touched
    JOIN receipts.chat_members AS member
        ON member.tenant_id = p_tenant AND member.chat_id = ANY (v_chats)
       AND member.chat_id = touched.chat_id AND member.user_id = touched.user_id
    JOIN receipts.messages AS message
        ON message.tenant_id = p_tenant AND message.chat_id = ANY (v_chats)
       AND message.chat_id = member.chat_id AND message.seq > member.read_seq
    JOIN receipts.receipt_chunks AS receipt
        ON receipt.tenant_id = p_tenant AND receipt.chat_id = ANY (v_chats)
       AND receipt.chat_id = member.chat_id AND receipt.seq = message.seq AND receipt.chunk = member.receipt_chunk
    WHERE receipts.was_recipient(p_tenant, member.chat_id, member.user_id, message.sender_id, message.seq,
                                 member.period_after_seq);
    ANALYZE import_group_scanned;

    WITH firsts AS (
        SELECT scanned.chat_id, scanned.user_id,
               min(scanned.seq) FILTER (WHERE NOT scanned.read) AS unread,
               min(scanned.seq) FILTER (WHERE NOT scanned.delivered) AS undelivered
        FROM import_group_scanned AS scanned GROUP BY scanned.chat_id, scanned.user_id
    ),
    above AS (
        SELECT scanned.chat_id, scanned.user_id, count(*) AS reads
        FROM import_group_scanned AS scanned
        JOIN firsts ON firsts.chat_id = scanned.chat_id AND firsts.user_id = scanned.user_id
        WHERE scanned.read AND scanned.seq > firsts.unread
        GROUP BY scanned.chat_id, scanned.user_id
    ),
    settled AS (
        SELECT touched.chat_id, touched.user_id, touched.read_any, touched.read_at,
               coalesce(firsts.unread - 1, chat.last_seq) AS read_seq,
               coalesce(firsts.undelivered - 1, chat.last_seq) AS delivered_seq,
               coalesce(above.reads, 0) AS reads_above
        FROM import_group_touched AS touched
        JOIN receipts.chats AS chat
            ON chat.tenant_id = p_tenant AND chat.chat_id = ANY (v_chats) AND chat.chat_id = touched.chat_id
        LEFT JOIN firsts ON firsts.chat_id = touched.chat_id AND firsts.user_id = touched.user_id
        LEFT JOIN above ON above.chat_id = touched.chat_id AND above.user_id = touched.user_id
    )
    UPDATE receipts.chat_members AS member SET
        read_seq = CASE WHEN settled.read_any THEN settled.read_seq ELSE member.read_seq END,
        reads_above = CASE WHEN settled.read_any THEN settled.reads_above ELSE member.reads_above END,
        delivered_seq = greatest(member.delivered_seq, settled.delivered_seq,
                                 CASE WHEN settled.read_any THEN settled.read_seq ELSE 0 END),
        marked_unread = member.marked_unread AND NOT settled.read_any,
        last_read_at = CASE WHEN settled.read_any AND (member.last_read_at IS NULL OR member.last_read_at < settled.read_at)
                            THEN settled.read_at ELSE member.last_read_at END,
        last_read_thread = CASE WHEN settled.read_any THEN NULL ELSE member.last_read_thread END
    FROM settled
    WHERE member.tenant_id = p_tenant AND member.chat_id = ANY (v_chats)
      AND member.chat_id = settled.chat_id AND member.user_id = settled.user_id;
    PERFORM set_config('enable_nestloop', v_nested_loops, true);

    -- The foreign keys' checks of the group's rows, with generic plans: planned for the
    -- values of its first rows, a check of a tenant the statistics do not know yet took an
    -- index of the tenant's other key and read all of its rows for each row checked (a group
    -- of 60,000 messages: 220 s; sql/migrations/0029_import_checked_foreign_keys.sql).
    -- Named one by one: ALL would also run the event log's commit-time check early
    -- (receipts.renumber_abandoned_events), which must run at the commit.
    v_plan_cache_mode := current_setting('plan_cache_mode');
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
    SET CONSTRAINTS receipts.receipt_chunks_tenant_id_chat_id_seq_fkey, receipts.mentions_tenant_id_chat_id_seq_fkey,
        receipts.threads_tenant_id_chat_id_root_seq_fkey, receipts.chat_members_tenant_id_chat_id_fkey,
        receipts.membership_periods_tenant_id_chat_id_user_id_fkey IMMEDIATE;
    PERFORM set_config('plan_cache_mode', v_plan_cache_mode, true);

    ---- 6. Events, errors, counts, progress. ----------------------------------------------
    -- One chat.imported a chat that changed, to its members and the tenant key.
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, audience_version)
    SELECT p_tenant, nextval('receipts.event_ids'), pg_current_xact_id(), 'chat.imported', chat.chat_id, NULL, '{}',
           chat.audience_version
    FROM receipts.chats AS chat
    WHERE chat.tenant_id = p_tenant AND chat.chat_id = ANY (v_chats)
      AND (EXISTS (SELECT FROM import_group_chats AS group_chat WHERE group_chat.chat_id = chat.chat_id AND NOT group_chat.existed)
           OR EXISTS (SELECT FROM import_group_new AS fresh WHERE fresh.chat_id = chat.chat_id)
           OR EXISTS (SELECT FROM import_group_reads AS given WHERE given.chat_id = chat.chat_id))
    ORDER BY chat.chat_id;
    IF FOUND THEN
        PERFORM receipts.wake_listeners();
    END IF;

    PERFORM receipts.record_import_errors(p_tenant, p_import,
        coalesce(array_agg(rejected.line ORDER BY rejected.line), '{}'),
        coalesce(array_agg(rejected.code ORDER BY rejected.line), '{}'),
        coalesce(array_agg(receipts.import_error_text(rejected.code) ORDER BY rejected.line), '{}'),
        count(*))
    FROM (SELECT line.line, line.code FROM import_chat_lines AS line WHERE line.code IS NOT NULL
          UNION ALL
          SELECT message.line, message.code FROM import_group_messages AS message WHERE message.code IS NOT NULL
          UNION ALL
          SELECT position.line, position.code FROM import_group_positions AS position WHERE position.code IS NOT NULL)
        AS rejected;

    PERFORM receipts.drop_staged_import(p_tenant, p_import, v_chats);
    UPDATE receipts.imports AS import SET
        chats_imported = import.chats_imported + v_new_chats,
        messages_imported = import.messages_imported + v_messages,
        receipts_imported = import.receipts_imported + v_receipts,
        next_unit = v_through + 1,
        lease_expires_at = now() + p_lease,
        state = CASE WHEN v_through >= v_units THEN 'done' ELSE 'running' END,
        finished_at = CASE WHEN v_through >= v_units THEN now() END,
        lease_owner = CASE WHEN v_through >= v_units THEN NULL ELSE p_owner END
    WHERE import.tenant_id = p_tenant AND import.import_id = p_import;
    IF v_through >= v_units THEN
        PERFORM receipts.drop_staged_import(p_tenant, p_import, NULL);
        RETURN QUERY SELECT 'done', v_through + 1, v_units;
    ELSE
        RETURN QUERY SELECT 'loaded', v_through + 1, v_units;
    END IF;
END;
$$;
COMMENT ON FUNCTION receipts.import_group(text, text, text, interval, bigint) IS
    'Loads the next group of an import''s chats (up to p_max_rows staged rows) for the lease holder p_owner: loaded | done | not_holder, with the next unit and the unit count. See sql/functions/imports.sql.';

-- What a rejection code means, for an import's errors.
CREATE OR REPLACE FUNCTION receipts.import_error_text(p_code text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE p_code
        WHEN 'chat_not_found' THEN 'no chat of this id: neither a chat line of the import nor a chat already there'
        WHEN 'conflict' THEN 'this id is taken with other content (or was deleted)'
        WHEN 'not_member' THEN 'the user is not a member of the chat'
        WHEN 'not_recipient' THEN 'the user joined the chat after the message was sent'
        WHEN 'read_before_message' THEN 'a receipt cannot come before the message was sent'
        WHEN 'out_of_order' THEN 'the chat already has messages sent after this one: an import appends to a chat''s history'
        WHEN 'thread_not_found' THEN 'threadId names no earlier message of the chat'
        WHEN 'thread_is_reply' THEN 'threadId names a reply: a thread''s root is a message of the main timeline'
        WHEN 'message_not_found' THEN 'upTo names no message of the chat'
        ELSE p_code END
$$;
COMMENT ON FUNCTION receipts.import_error_text(text) IS 'Why an import line with this rejection code was rejected.';
