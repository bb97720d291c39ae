-- Marking messages read, delivered, or a chat unread.
--
-- Each marking is a guarded UPDATE that appends the user to the chunk rows of the messages
-- where they are missing (see receipts.receipt_chunks in the baseline migration), only on
-- messages of others sent during one of the user's membership periods. Under concurrent
-- readers of one message, each UPDATE re-checks the guard on the newest row version, so no
-- reader is lost and none is added twice. The member row, locked first, serialises one
-- user's markings in one chat, so their watermarks and reads_above stay exact.
--
-- Reads have two statements, both compositions of the same rule functions (who a
-- message is for, what a chunk row says is read, what a scope covers, where a watermark
-- moves, what it passes):
-- receipts.mark_read_each, for any number of requests (a request is one user's read in one
-- chat: of some messages, of everything up to one, or of everything), and receipts.mark_read
-- for exactly one, which the service calls when a batch holds a single request (most of them
-- when the service is not busy) and psql calls by hand. One request costs mark_read about
-- half what mark_read_each costs PostgreSQL (a few small plans instead of one of some seventy
-- nodes started on every call), and mark_read_each is cheaper per request from a few requests
-- on (one statement and one trigger run for all of them). SingleReadBatchTests runs every
-- request shape through both on the same data and compares answers, receipts, counts and
-- events.
--
-- Deliveries have one statement, receipts.mark_delivered, of the same rule functions: the
-- service records them one at a time (a WebSocket's acknowledgement, a POST), none batched.
-- A set-based form, as receipts.mark_read_each is for reads, would cost each of them some
-- three times as much (in a loop in psql: mark_read_each for one request 1.2 ms a call,
-- mark_read 0.4 ms, mark_delivered 0.25 ms); it is for when deliveries are batched.
--
-- A read or delivery up to a message, or of everything, may have a scope (threads,
-- sql/migrations/0012_threads.sql): null, the whole chat; '' (no id is empty), the main
-- timeline; else the id of a root, that thread's replies. Messages of the scope are marked
-- one by one, as reads out of order are: the watermark moves only as far as everything
-- below it is read, whatever the scope.

-- Whether a message of thread p_thread (null: a message of the main timeline) is in a marking's
-- scope: null, the whole chat; '' (no id is empty), the main timeline; else the id of a root,
-- that thread's replies. Inlined by its callers.
CREATE OR REPLACE FUNCTION receipts.in_scope(p_scope text, p_thread text)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_scope IS NULL OR (p_scope = '' AND p_thread IS NULL) OR p_thread = p_scope
$$;
COMMENT ON FUNCTION receipts.in_scope(text, text) IS
    'Whether a message of thread p_thread (null: the main timeline) is in the scope p_scope (null: the whole chat; empty: the main timeline; else a root''s replies).';

-- Whether a member's chunk row records their read of its message, shown (read_by) or hidden
-- (hidden_read_by, receipts off): the one test of "read" on a row, for the guards that check
-- it on the row an UPDATE holds and for the lookups of a read out of order
-- (receipts.unread_by). Inlined by its callers (SQL, IMMUTABLE, one expression).
CREATE OR REPLACE FUNCTION receipts.has_read(p_user text, p_read_by text[], p_hidden_read_by text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_user = ANY (p_read_by) OR p_user = ANY (p_hidden_read_by)
$$;
COMMENT ON FUNCTION receipts.has_read(text, text[], text[]) IS
    'Whether a chunk row (its read_by and hidden_read_by) records the user''s read of its message.';

-- receipts.has_read for several readers at once: whether the row records a read by any of
-- them (the guard of rows that get several readers in one call, receipts.mark_read_each).
CREATE OR REPLACE FUNCTION receipts.has_read_any(p_users text[], p_read_by text[], p_hidden_read_by text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_read_by && p_users OR p_hidden_read_by && p_users
$$;
COMMENT ON FUNCTION receipts.has_read_any(text[], text[], text[]) IS
    'Whether a chunk row (its read_by and hidden_read_by) records a read by any of the users.';

-- A message of a chat by its id (no row when there is none), looked up by its key whatever the
-- statistics: a generic plan takes a chat for about a row in a database of many tenants (or in
-- one no ANALYZE has seen), and then any index of the chat looks as good as the key's, so a
-- lookup by id walked the whole chat through another index (its thread's or its sender's)
-- and filtered. Ordered by the key's last column: with sorts off (as every caller runs),
-- only the key's index gives that order. The id is matched as a range of one value, not by
-- `=`: after an equality the planner drops the ORDER BY as already satisfied, and the order
-- would choose nothing. SQL, so that callers inline it (a lateral call stays a lookup per row).
CREATE OR REPLACE FUNCTION receipts.message_by_id(p_tenant text, p_chat text, p_message text)
RETURNS TABLE (chat_id text, seq bigint, sender_id text, thread_id text)
LANGUAGE sql STABLE AS $$
    SELECT message.chat_id, message.seq, message.sender_id, message.thread_id
    FROM receipts.messages AS message
    WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
      AND message.message_id >= p_message AND message.message_id <= p_message
    ORDER BY message.message_id
    LIMIT 1
$$;
COMMENT ON FUNCTION receipts.message_by_id(text, text, text) IS
    'A message of a chat by its id (chat, seq, sender, thread), or no row; a lookup by the key whatever the statistics.';

-- The first message in (p_after, p_through] the user has still to mark: sent while they were
-- a member, not their own, and not read by them (p_read) or not delivered to them (not
-- p_read), by their chunk row (p_chunk: chat_members.receipt_chunk) of each message. No row
-- when there is none. Where a watermark moves after a marking: just below it.
--
-- A walk of the seq index that stops at its first hit: it reads only what lies before the
-- answer. While p_after is at or above the start of the user's newest membership period
-- (p_newest_period_after: chat_members.period_after_seq), every message above it was sent
-- while they were a member: one walk, no look at the periods (the common case); else period
-- by period in order, the first period with a hit ending the search. The receipt test is a
-- subquery of its own (OFFSET 0 keeps it from becoming a join): a lookup of the message's
-- chunk row by its whole key. As a join, a generic plan may read every chunk row of the chat
-- for each message (a read took 20 s in a chat of 10,000 unread). Its callers turn sorts off
-- (a sort of all the candidates would keep the walk from stopping at its first hit). SQL
-- returning a table, so that the statement that reads it inlines it (no call of its own; the
-- branch not taken is never run; with p_read a constant, only one receipt test is left); no
-- SET clause, not STRICT, STABLE: each would stop the inlining.
CREATE OR REPLACE FUNCTION receipts.first_unmarked_seq(
    p_tenant text, p_chat text, p_user text, p_chunk integer, p_after bigint, p_through bigint, p_newest_period_after bigint,
    p_read boolean)
RETURNS TABLE (seq bigint)
LANGUAGE sql STABLE AS $$
    SELECT span.seq
    FROM (
        SELECT p_after AS after_seq, p_through AS through_seq WHERE p_after >= p_newest_period_after
        UNION ALL
        (SELECT greatest(period.after_seq, p_after), least(coalesce(period.until_seq, p_through), p_through)
         FROM receipts.membership_periods AS period
         WHERE p_after < p_newest_period_after
           AND period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.user_id = p_user
           AND (period.until_seq IS NULL OR period.until_seq > p_after) AND period.after_seq < p_through
         ORDER BY period.after_seq)
    ) AS range
    CROSS JOIN LATERAL (
        SELECT message.seq
        FROM receipts.messages AS message
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
          AND message.seq > range.after_seq AND message.seq <= range.through_seq
          AND message.sender_id <> p_user
          AND NOT EXISTS (SELECT FROM receipts.receipt_chunks AS receipt
                          WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat
                            AND receipt.seq = message.seq AND receipt.chunk = p_chunk
                            AND CASE WHEN p_read THEN receipts.has_read(p_user, receipt.read_by, receipt.hidden_read_by)
                                     ELSE p_user = ANY (receipt.delivered_to) END
                          OFFSET 0)
        ORDER BY message.seq
        LIMIT 1
    ) AS span
    LIMIT 1;
$$;
COMMENT ON FUNCTION receipts.first_unmarked_seq(text, text, text, integer, bigint, bigint, bigint, boolean) IS
    'The first message in (p_after, p_through] the user has still to read (p_read) or to receive (not p_read), or no row; p_newest_period_after: chat_members.period_after_seq. Scans only what lies before it.';

-- Where a member's watermark moves after a marking that searched from p_search_from: just
-- below the first message in (p_search_from, p_last_seq] still to read (p_read) or to receive,
-- or to the chat's last message when none is. Inlined by its callers.
CREATE OR REPLACE FUNCTION receipts.watermark_after(
    p_tenant text, p_chat text, p_user text, p_chunk integer, p_search_from bigint, p_last_seq bigint,
    p_newest_period_after bigint, p_read boolean)
RETURNS TABLE (seq bigint)
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT first.seq
                     FROM receipts.first_unmarked_seq(p_tenant, p_chat, p_user, p_chunk, p_search_from, p_last_seq,
                                                      p_newest_period_after, p_read) AS first) - 1,
                    p_last_seq)
$$;
COMMENT ON FUNCTION receipts.watermark_after(text, text, text, integer, bigint, bigint, bigint, boolean) IS
    'A read (p_read) or delivery watermark after a marking: just below the first message above p_search_from still to mark, else the chat''s last.';

-- Where the search for a reader's new watermark starts after a read (receipts.watermark_after):
-- a read up to a message (p_through) of the whole chat (no scope) read everything up to it,
-- so the search starts there; any other read (of messages by id, or up to a message of one
-- timeline or thread) starts at the old watermark. Inlined by its callers.
CREATE OR REPLACE FUNCTION receipts.read_search_from(p_read_seq bigint, p_through boolean, p_scope text, p_up_to_seq bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_through AND p_scope IS NULL THEN greatest(p_read_seq, p_up_to_seq) ELSE p_read_seq END
$$;
COMMENT ON FUNCTION receipts.read_search_from(bigint, boolean, text, bigint) IS
    'Where the search for a reader''s new watermark starts after a read: the read''s end for a read up to a message of the whole chat, else the old watermark.';

-- Reads, for any number of requests in one call. The service gathers a tenant's concurrent
-- reads into one call (a TenantBatcher): the statements, the trigger runs and the commit are
-- shared, and each request gets the answer it would get alone.
--
-- The arguments list items, one per array position: (chat, user, message, through). The
-- items of one (chat, user) make one request, answered by one row, numbered in the order of
-- their first item: several items with through false read those messages (an unknown id is
-- no error: nothing to read); one item with through true reads everything above the user's
-- watermark up to that message (message_not_found when it is not in the chat), or, with a
-- null message, all of it. A through item is the only item of its request. p_scopes (per
-- item, may be null) limits a through item to a scope (receipts.in_scope): a root that is no
-- message of the chat, or a reply, answers thread_not_found.
--
-- In steps, each a section or a function of its own below, named for what it does:
--   1. begin: the tenant, the items checked, the member rows locked (here);
--   2. the requests, and what the reads of current members need (receipts.read_requests);
--   3.-5. the messages each request reads, the guarded appends of the readers to the chunk
--      rows, and what each request marked (receipts.append_reads: one statement);
--   6. the member rows settled: watermarks, reads_above, the mark cleared (receipts.settle_reads);
--   7. the answers, with the unread counts (receipts.read_answers).
-- Each is made of the rule functions (receipts.was_recipient, receipts.in_scope,
-- receipts.has_read, receipts.watermark_after, receipts.messages_to_read, the unread view)
-- and restates none of them.
--
-- Plans: every statement here is index lookups by key, a range of one chat's messages by
-- seq, or a join of at most a few hundred requests; each is planned once, generically
-- (plan_cache_mode: replanning with each call's values cost more than it saved), and the
-- plan must fit a call of one single read and a read-all of 10,000 alike, whatever the
-- statistics said when it was made. So no hash or merge joins (the planner, not knowing how
-- many the arrays hold, would hash a whole small table) and no sequential scans (a generic
-- plan made while the tables looked empty read every chunk row of the chat once per message:
-- a read-all of 10,000 took 15 s instead of 0.1 s); PlanReuseTests checks that work stays
-- linear. jit off: with a method disabled, a plan that has no other way costs ten billion,
-- which would have PostgreSQL compile the statement on every call. enable_sort off: a
-- generic plan takes a chat for about a row in a database of many tenants (tenant and chat
-- taken as independent), so sorting every message above a watermark looked as cheap as
-- walking them in seq order, and receipts.first_unmarked_seq's walk, which stops at its
-- first hit, read the whole backlog on every read (PlanReuseTests.oneMessageBesideABacklog).
-- Each step's PL/pgSQL function has these settings too (they would hold for it anyway, called
-- from here, but not called alone); receipts.read_requests, SQL, is inlined into the
-- statement of receipts.append_reads and planned with its settings.
CREATE OR REPLACE FUNCTION receipts.mark_read_each(
    p_tenant text, p_chats text[], p_users text[], p_messages text[], p_through boolean[], p_scopes text[] DEFAULT NULL)
RETURNS TABLE (request integer, outcome text, marked integer, unread_count integer)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET enable_sort = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    -- Per request, in the order of the requests (receipts.append_reads says what each holds).
    v_requests integer[];
    v_chats text[];
    v_readers text[];
    v_found boolean[];
    v_no_thread boolean[];
    v_search_from bigint[];
    v_marked integer[];
    v_threads text[];
BEGIN
    -- 1. Begin: the tenant, the items checked, the member rows locked. The member rows all at
    -- once, in (chat, user) order: under them, which of these users may still read which
    -- message cannot change, so the appends add exactly the readers found eligible; and one
    -- user's reads in one chat are serialised, so their watermarks and reads_above stay exact.
    PERFORM receipts.begin_batch('receipts.mark_read_each', p_tenant, ARRAY['chats', 'users', 'messages', 'throughs'],
                                 ARRAY[cardinality(p_chats), cardinality(p_users), cardinality(p_messages), cardinality(p_through)]);
    IF EXISTS (SELECT FROM unnest(p_chats, p_users, p_through) AS item(chat, reader, through)
               GROUP BY item.chat, item.reader HAVING bool_or(item.through) AND count(*) > 1) THEN
        RAISE EXCEPTION 'receipts.mark_read_each: a read up to a message (or of all) must be the only item of its request';
    END IF;
    PERFORM FROM receipts.chat_members AS member
    JOIN (SELECT DISTINCT item.chat, item.reader FROM unnest(p_chats, p_users) AS item(chat, reader)) AS pair
        ON member.chat_id = pair.chat AND member.user_id = pair.reader
    WHERE member.tenant_id = p_tenant AND member.left_at IS NULL
    ORDER BY member.chat_id, member.user_id
    FOR UPDATE OF member;

    -- 2.-5. The requests (receipts.read_requests), the readers appended, what each marked.
    SELECT * INTO v_requests, v_chats, v_readers, v_found, v_no_thread, v_search_from, v_marked, v_threads
    FROM receipts.append_reads(p_tenant, p_chats, p_users, p_messages, p_through, p_scopes);

    -- 6. The member rows settled.
    PERFORM receipts.settle_reads(p_tenant, v_chats, v_readers, v_found, v_search_from, v_marked, v_threads);

    -- 7. The answers.
    RETURN QUERY SELECT * FROM receipts.read_answers(p_tenant, v_requests, v_chats, v_readers, v_found, v_marked, v_no_thread);
END;
$$;
COMMENT ON FUNCTION receipts.mark_read_each(text, text[], text[], text[], boolean[], text[]) IS
    'Marks messages read for each request of the arrays (items (chat, user, message, through, scope); the items of one chat and user are one request; a scope limits a through item to the main timeline or a thread): one row per request, in order, with marked | not_member | message_not_found | thread_not_found | chat_not_found, how many changed and the new unread count.';

-- Step 2 of receipts.mark_read_each: its items as requests, one row each, numbered in the
-- order of their first item: the ids it names (messages, for a read of messages), or the
-- message it reads up to (up_to_seq: its seq, the chat's last for a read of all, null when it
-- is not in the chat) and its scope; and, for a current member (member), what the read needs:
-- the member row, whether the reader's receipts are shown (visible), whether the scope names
-- no root of the chat (no_thread), and whether no other request of the call touches the same
-- chunk rows (alone: each request, when the call's requests are of different chats). SQL, so
-- that the statement that reads it inlines it.
CREATE OR REPLACE FUNCTION receipts.read_requests(
    p_tenant text, p_chats text[], p_users text[], p_messages text[], p_through boolean[], p_scopes text[])
RETURNS TABLE (request integer, chat text, reader text, messages text[], through boolean, scope text, member boolean,
               no_thread boolean, read_seq bigint, period_after_seq bigint, chunk integer, visible boolean, up_to_seq bigint,
               alone boolean)
LANGUAGE sql STABLE AS $$
    WITH request AS (
        SELECT (row_number() OVER (ORDER BY min(item.position)))::integer AS request, item.chat, item.reader,
               array_agg(item.message) AS messages, bool_or(item.through) AS through,
               max(item.message) FILTER (WHERE item.through) AS up_to, max(item.scope) FILTER (WHERE item.through) AS scope
        FROM (SELECT item.position::integer AS position, item.chat, item.reader, item.message,
                     coalesce(item.through, false) AS through, p_scopes[item.position] AS scope
              FROM unnest(p_chats, p_users, p_messages, p_through) WITH ORDINALITY
                  AS item(chat, reader, message, through, position)) AS item
        GROUP BY item.chat, item.reader
    ),
    target AS (
        SELECT request.request, request.chat,
               -- Looked up only for a scope that names a root (a CASE: with AND, a null scope
               -- still ran the lookup, which a generic plan may make a scan of the chat).
               CASE WHEN request.scope IS NULL OR request.scope = '' THEN false
                    ELSE NOT EXISTS (SELECT FROM receipts.message_by_id(p_tenant, request.chat, request.scope) AS root
                                     WHERE root.thread_id IS NULL) END
                   AS no_thread,
               member.read_seq, member.period_after_seq, member.receipt_chunk AS chunk,
               coalesce(setting.read_receipts, true) AS visible,
               CASE WHEN NOT request.through THEN NULL
                    WHEN request.up_to IS NULL THEN chat.last_seq
                    ELSE (SELECT message.seq FROM receipts.message_by_id(p_tenant, request.chat, request.up_to) AS message)
               END AS up_to_seq
        FROM request
        JOIN receipts.chat_members AS member
            ON member.tenant_id = p_tenant AND member.chat_id = request.chat AND member.user_id = request.reader
           AND member.left_at IS NULL
        JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = request.chat
        LEFT JOIN receipts.users AS setting ON setting.tenant_id = p_tenant AND setting.user_id = request.reader
    )
    SELECT request.request, request.chat, request.reader, request.messages, request.through, request.scope,
           target.request IS NOT NULL, target.no_thread, target.read_seq, target.period_after_seq, target.chunk,
           target.visible, target.up_to_seq,
           NOT EXISTS (SELECT FROM target AS other
                       WHERE other.chat = target.chat AND other.chunk = target.chunk AND other.request <> target.request)
    FROM request
    LEFT JOIN target ON target.request = request.request
$$;
COMMENT ON FUNCTION receipts.read_requests(text, text[], text[], text[], boolean[], text[]) IS
    'For receipts.mark_read_each: its items as requests, in order (the ids named, or the seq read up to and the scope), with what a current member''s read needs (member row, visible, no_thread) and whether it is alone on its chunk rows.';

-- Steps 3 to 5 of receipts.mark_read_each, one statement: the messages each request reads,
-- the guarded appends of their readers to the chunk rows, and what each request marked. Per
-- request, in order (as receipts.read_requests numbers them): its chat and user; reads_found:
-- true once read, false when its up-to message is not in the chat, null when the user is no
-- member; no_threads: its scope names no root; search_froms: where the search for its new
-- watermark starts; marked_counts: how many it marked; threads: the thread whose replies it
-- marked, when they were of one (else null).
--
-- A request alone on its chunk rows goes to them as it is, its guard checked against the row
-- itself, which saves a lookup and an aggregate a row (a read-all of 10,000: 150-175 ms to
-- about 110); the readers of requests that share rows (readers of one message in one chunk)
-- are gathered by row first. Another user's concurrent read of the same chunk row
-- re-evaluates the UPDATE on the newest row version: no reader is lost. Rows are updated in
-- key order, the same in every call.
CREATE OR REPLACE FUNCTION receipts.append_reads(
    p_tenant text, p_chats text[], p_users text[], p_messages text[], p_through boolean[], p_scopes text[],
    OUT requests integer[], OUT chats text[], OUT users text[], OUT reads_found boolean[], OUT no_threads boolean[],
    OUT search_froms bigint[], OUT marked_counts integer[], OUT threads text[])
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET enable_sort = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    WITH request AS (
        SELECT * FROM receipts.read_requests(p_tenant, p_chats, p_users, p_messages, p_through, p_scopes)
    ),
    ---- 3. The messages each request reads, and the readers of rows that requests share. ----
    -- The messages each request of a member names: by id (each once), or the range above
    -- the watermark in its scope.
    named AS (
        SELECT DISTINCT target.request, target.chat, target.reader, target.chunk, target.visible, target.period_after_seq,
                        target.alone, message.seq, message.sender_id, message.thread_id
        FROM request AS target
        CROSS JOIN LATERAL unnest(target.messages) AS item(message)
        CROSS JOIN LATERAL receipts.message_by_id(p_tenant, target.chat, item.message) AS message
        WHERE target.member AND NOT target.through
        UNION ALL
        SELECT target.request, target.chat, target.reader, target.chunk, target.visible, target.period_after_seq,
               target.alone, message.seq, message.sender_id, message.thread_id
        FROM request AS target
        JOIN receipts.messages AS message
            ON message.tenant_id = p_tenant AND message.chat_id = target.chat
           AND message.seq > target.read_seq AND message.seq <= target.up_to_seq
        WHERE target.member AND target.through AND target.no_thread IS NOT TRUE
          AND receipts.in_scope(target.scope, message.thread_id)
    ),
    -- Of those of the requests that share rows, the ones the reader was to read
    -- (receipts.was_recipient) and has not read (receipts.has_read on the row).
    eligible AS (
        SELECT named.request, named.chat, named.seq, named.chunk, named.thread_id, named.reader, named.visible,
               NOT (named.reader = ANY (receipt.delivered_to)) AS undelivered
        FROM named
        JOIN receipts.receipt_chunks AS receipt
            ON receipt.tenant_id = p_tenant AND receipt.chat_id = named.chat AND receipt.seq = named.seq
           AND receipt.chunk = named.chunk
        WHERE NOT named.alone
          AND receipts.was_recipient(p_tenant, named.chat, named.reader, named.sender_id, named.seq, named.period_after_seq)
          AND NOT receipts.has_read(named.reader, receipt.read_by, receipt.hidden_read_by)
    ),
    per_chunk AS (
        -- In the order of the requests: a row's readers as if the requests had come one by one.
        SELECT chat, seq, chunk, thread_id,
               coalesce(array_agg(reader ORDER BY request) FILTER (WHERE visible), '{}') AS visible_readers,
               coalesce(array_agg(reader ORDER BY request) FILTER (WHERE NOT visible), '{}') AS hidden_readers,
               coalesce(array_agg(reader ORDER BY request) FILTER (WHERE undelivered), '{}') AS receivers,
               array_agg(reader ORDER BY request) AS readers
        FROM eligible GROUP BY chat, seq, chunk, thread_id
    ),
    ---- 4. The guarded appends of the readers to the chunk rows. -----------------------------
    -- What each chunk row gets: the readers gathered for it (per_chunk), or the one reader of
    -- a request alone on its rows, of the messages they were to read (receipts.was_recipient),
    -- whom the guard checks against the row itself (reader not null).
    appends AS (
        SELECT per_chunk.chat, per_chunk.seq, per_chunk.chunk, per_chunk.thread_id, NULL::text AS reader, NULL::boolean AS visible,
               per_chunk.visible_readers, per_chunk.hidden_readers, per_chunk.receivers, per_chunk.readers
        FROM per_chunk
        UNION ALL
        SELECT named.chat, named.seq, named.chunk, named.thread_id, named.reader, named.visible, NULL, NULL, NULL, ARRAY[named.reader::text]
        FROM named
        WHERE named.alone
          AND receipts.was_recipient(p_tenant, named.chat, named.reader, named.sender_id, named.seq, named.period_after_seq)
        ORDER BY 1, 2, 3  -- rows are locked in this order, the same in every call
    ),
    updated AS (
        UPDATE receipts.receipt_chunks AS receipt SET
            read_by        = CASE WHEN appends.reader IS NULL THEN receipt.read_by || appends.visible_readers
                                  WHEN appends.visible THEN receipt.read_by || appends.reader
                                  ELSE receipt.read_by END,
            read_at        = CASE WHEN appends.reader IS NULL
                                  THEN receipt.read_at || array_fill(now(), ARRAY[cardinality(appends.visible_readers)])
                                  WHEN appends.visible THEN receipt.read_at || now()
                                  ELSE receipt.read_at END,
            hidden_read_by = CASE WHEN appends.reader IS NULL THEN receipt.hidden_read_by || appends.hidden_readers
                                  WHEN appends.visible THEN receipt.hidden_read_by
                                  ELSE receipt.hidden_read_by || appends.reader END,
            delivered_to   = CASE WHEN appends.reader IS NULL THEN receipt.delivered_to || appends.receivers
                                  WHEN appends.reader = ANY (receipt.delivered_to) THEN receipt.delivered_to
                                  ELSE receipt.delivered_to || appends.reader END,
            delivered_at   = CASE WHEN appends.reader IS NULL
                                  THEN receipt.delivered_at || array_fill(now(), ARRAY[cardinality(appends.receivers)])
                                  WHEN appends.reader = ANY (receipt.delivered_to) THEN receipt.delivered_at
                                  ELSE receipt.delivered_at || now() END
        FROM appends
        WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = appends.chat
          AND receipt.seq = appends.seq AND receipt.chunk = appends.chunk
          -- The guard: none of these readers is on the row already (evaluated again on the
          -- newest version of a row another reader changed meanwhile).
          AND NOT receipts.has_read_any(appends.readers, receipt.read_by, receipt.hidden_read_by)
          AND (appends.reader IS NOT NULL OR NOT (receipt.delivered_to && appends.receivers))
        RETURNING appends.chat, appends.thread_id, appends.reader, appends.readers
    ),
    ---- 5. What each request marked, and where its watermark's search starts. ---------------
    -- How many each reader got, and the thread when the replies among them are of one.
    marked AS (
        SELECT each.chat, each.reader, count(*)::integer AS marked,
               CASE WHEN min(each.thread_id) = max(each.thread_id) THEN min(each.thread_id) END AS thread
        FROM (SELECT updated.chat, updated.thread_id, updated.reader FROM updated WHERE updated.reader IS NOT NULL
              UNION ALL
              SELECT updated.chat, updated.thread_id, gathered.reader
              FROM updated, unnest(updated.readers) AS gathered(reader) WHERE updated.reader IS NULL) AS each
        GROUP BY each.chat, each.reader
    )
    SELECT array_agg(request.request ORDER BY request.request),
           array_agg(request.chat ORDER BY request.request),
           array_agg(request.reader ORDER BY request.request),
           array_agg(CASE WHEN NOT request.member THEN NULL
                          ELSE NOT request.through OR (request.up_to_seq IS NOT NULL AND request.no_thread IS NOT TRUE) END
                     ORDER BY request.request),
           array_agg(coalesce(request.no_thread, false) ORDER BY request.request),
           array_agg(receipts.read_search_from(request.read_seq, request.through, request.scope, request.up_to_seq)
                     ORDER BY request.request),
           array_agg(coalesce(marked.marked, 0) ORDER BY request.request),
           array_agg(marked.thread ORDER BY request.request)
    INTO requests, chats, users, reads_found, no_threads, search_froms, marked_counts, threads
    FROM request
    LEFT JOIN marked ON marked.chat = request.chat AND marked.reader = request.reader;
END;
$$;
COMMENT ON FUNCTION receipts.append_reads(text, text[], text[], text[], boolean[], text[]) IS
    'For receipts.mark_read_each: appends each request''s reader to the chunk rows of the messages it reads (guarded); per request, in order: chat, user, whether read (null: no member), whether its scope names no root, where its watermark''s search starts, how many it marked, the thread of its replies when one.';

-- Step 6 of receipts.mark_read_each: the member rows of the requests read (p_found) that
-- marked something or cleared a mark, settled. read_seq moves to just below the first message
-- still unread (receipts.watermark_after, searching from p_search_from), and reads_above
-- drops by the messages it passes that were the reader's to read (receipts.messages_to_read,
-- the rule the unread view counts with). A request that marked nothing and cleared no mark
-- leaves its member row alone (its watermark and count cannot have changed).
CREATE OR REPLACE FUNCTION receipts.settle_reads(
    p_tenant text, p_chats text[], p_users text[], p_found boolean[], p_search_from bigint[], p_marked integer[],
    p_threads text[])
RETURNS void
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET enable_sort = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    UPDATE receipts.chat_members AS member SET
        read_seq      = moved.new_read_seq,
        delivered_seq = greatest(member.delivered_seq, moved.new_read_seq),
        reads_above   = member.reads_above + moved.marked
                        - (SELECT passed.messages
                           FROM receipts.messages_to_read(p_tenant, member.chat_id, member.user_id, member.read_seq,
                                                          moved.new_read_seq, member.period_after_seq) AS passed),
        marked_unread = false,
        last_read_at  = CASE WHEN moved.marked > 0 THEN now() ELSE member.last_read_at END,
        last_read_thread = CASE WHEN moved.marked > 0 THEN moved.thread ELSE member.last_read_thread END
    FROM (
        SELECT done.chat, done.reader, done.marked, done.thread,
               (SELECT watermark.seq
                FROM receipts.watermark_after(p_tenant, done.chat, done.reader, current.receipt_chunk, done.search_from,
                                              chat.last_seq, current.period_after_seq, true) AS watermark) AS new_read_seq
        FROM unnest(p_chats, p_users, p_found, p_search_from, p_marked, p_threads)
            AS done(chat, reader, found, search_from, marked, thread)
        JOIN receipts.chat_members AS current
            ON current.tenant_id = p_tenant AND current.chat_id = done.chat AND current.user_id = done.reader
           AND current.left_at IS NULL
        JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = done.chat
        WHERE done.found AND (done.marked > 0 OR current.marked_unread)
        OFFSET 0  -- new_read_seq computed once per member, not once per use below
    ) AS moved
    WHERE member.tenant_id = p_tenant AND member.chat_id = moved.chat AND member.user_id = moved.reader;
END;
$$;
COMMENT ON FUNCTION receipts.settle_reads(text, text[], text[], boolean[], bigint[], integer[], text[]) IS
    'For receipts.mark_read_each: moves the read watermark and reads_above of each member whose read (p_found) marked something or cleared a mark, and clears the mark.';

-- Step 7 of receipts.mark_read_each: one row per request, in order: its outcome, how many it
-- marked, and the new unread count (the unread view) of a request read.
CREATE OR REPLACE FUNCTION receipts.read_answers(
    p_tenant text, p_requests integer[], p_chats text[], p_users text[], p_found boolean[], p_marked integer[],
    p_no_thread boolean[])
RETURNS TABLE (request integer, outcome text, marked integer, unread_count integer)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET enable_sort = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT done.request,
           CASE WHEN done.found THEN 'marked'
                WHEN done.no_thread THEN 'thread_not_found'
                WHEN NOT done.found THEN 'message_not_found'
                WHEN chat.chat_id IS NOT NULL THEN 'not_member'
                ELSE 'chat_not_found' END,
           done.marked,
           -- A subquery, so the count is looked up by key for each request.
           CASE WHEN done.found THEN (SELECT unread.unread_count FROM receipts.member_unread AS unread
                                      WHERE unread.tenant_id = p_tenant AND unread.chat_id = done.chat
                                        AND unread.user_id = done.reader)
                ELSE 0 END
    FROM unnest(p_requests, p_chats, p_users, p_found, p_marked, p_no_thread) AS done(request, chat, reader, found, marked, no_thread)
    LEFT JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = done.chat
    ORDER BY done.request;
END;
$$;
COMMENT ON FUNCTION receipts.read_answers(text, integer[], text[], text[], boolean[], integer[], boolean[]) IS
    'For receipts.mark_read_each: each request''s outcome (marked | thread_not_found | message_not_found | not_member | chat_not_found), how many it marked, and the unread count of a request read.';

-- The chunk rows of a read of a range (everything up to a message, or all, in a scope): the
-- messages in (p_after, p_through] that were the user's to read (receipts.was_recipient,
-- receipts.in_scope) and their chunk rows, joined by seq, both walked in seq order over the
-- range, with the guard; how many were marked, and the thread when the replies among them
-- are of one. A function of its own for its join: nested loops off (merge and hash joins on:
-- mark_read turns them off, and a function's settings hold for what it calls), so the two
-- ranges are merged (or hashed), each walked once. A nested loop would be as good only with
-- the messages outside; taking a chat for about a row (a generic plan, a database of many
-- tenants, or one not analyzed yet), the planner may put the chunk rows outside instead and
-- walk the messages again for each: a read-all of 10,000 fetched 100 million message rows
-- (45 s) in a database no ANALYZE had seen (PlanReuseTests.readAllAfterSmallRead).
CREATE OR REPLACE FUNCTION receipts.mark_range_read(
    p_tenant text, p_chat text, p_user text, p_chunk integer, p_visible boolean, p_after bigint, p_through bigint,
    p_scope text, p_newest_period_after bigint)
RETURNS TABLE (marked integer, thread text)
LANGUAGE plpgsql
SET enable_nestloop = off SET enable_mergejoin = on SET enable_hashjoin = on SET enable_seqscan = off SET enable_sort = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH updated AS (
        UPDATE receipts.receipt_chunks AS receipt SET
            read_by        = CASE WHEN p_visible THEN receipt.read_by || p_user ELSE receipt.read_by END,
            read_at        = CASE WHEN p_visible THEN receipt.read_at || now() ELSE receipt.read_at END,
            hidden_read_by = CASE WHEN p_visible THEN receipt.hidden_read_by ELSE receipt.hidden_read_by || p_user END,
            delivered_to   = CASE WHEN p_user = ANY (receipt.delivered_to) THEN receipt.delivered_to
                                  ELSE receipt.delivered_to || p_user END,
            delivered_at   = CASE WHEN p_user = ANY (receipt.delivered_to) THEN receipt.delivered_at
                                  ELSE receipt.delivered_at || now() END
        FROM receipts.messages AS message
        WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
          AND message.seq > p_after AND message.seq <= p_through
          AND receipts.in_scope(p_scope, message.thread_id)
          AND receipts.was_recipient(p_tenant, p_chat, p_user, message.sender_id, message.seq, p_newest_period_after)
          AND receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat
          AND receipt.seq > p_after AND receipt.seq <= p_through AND receipt.chunk = p_chunk
          AND receipt.seq = message.seq
          -- The guard (evaluated again on the newest version of a row another reader changed meanwhile).
          AND NOT receipts.has_read(p_user, receipt.read_by, receipt.hidden_read_by)
        RETURNING message.thread_id
    )
    SELECT count(*)::integer, CASE WHEN min(updated.thread_id) = max(updated.thread_id) THEN min(updated.thread_id) END
    FROM updated;
END;
$$;
COMMENT ON FUNCTION receipts.mark_range_read(text, text, text, integer, boolean, bigint, bigint, text, bigint) IS
    'For receipts.mark_read: marks read by a user the messages in (p_after, p_through] of a scope that were theirs to read (chunk p_chunk; p_visible false: a hidden read); how many, and the thread when the replies among them are of one.';

-- The chunk rows of a delivery of a range (everything up to a message, or all, in a scope),
-- as receipts.mark_range_read does it for reads: the messages in (p_after, p_through] that
-- were the user's to receive (p_recipient_of: receipts.membership_seqs) merged with their
-- chunk rows by seq, each range walked once; how many were marked.
CREATE OR REPLACE FUNCTION receipts.mark_range_delivered(
    p_tenant text, p_chat text, p_user text, p_chunk integer, p_after bigint, p_through bigint, p_scope text,
    p_recipient_of int8multirange)
RETURNS integer
LANGUAGE plpgsql
SET enable_nestloop = off SET enable_mergejoin = on SET enable_hashjoin = on SET enable_seqscan = off SET enable_sort = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_marked integer;
BEGIN
    UPDATE receipts.receipt_chunks AS receipt SET
        delivered_to = array_append(receipt.delivered_to, p_user),
        delivered_at = array_append(receipt.delivered_at, now())
    FROM receipts.messages AS message
    WHERE message.tenant_id = p_tenant AND message.chat_id = p_chat
      AND message.seq > p_after AND message.seq <= p_through
      AND message.sender_id <> p_user
      AND receipts.in_scope(p_scope, message.thread_id)
      AND message.seq <@ p_recipient_of
      AND receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat
      AND receipt.seq > p_after AND receipt.seq <= p_through AND receipt.chunk = p_chunk
      AND receipt.seq = message.seq
      AND NOT (p_user = ANY (receipt.delivered_to));
    GET DIAGNOSTICS v_marked = ROW_COUNT;
    RETURN v_marked;
END;
$$;
COMMENT ON FUNCTION receipts.mark_range_delivered(text, text, text, integer, bigint, bigint, text, int8multirange) IS
    'For receipts.mark_delivered: marks delivered to a user the messages in (p_after, p_through] of a scope that were theirs to receive (chunk p_chunk; p_recipient_of: the seqs sent while a member); how many.';

-- One request, in a few small statements: the messages of p_message_ids, or everything up to
-- p_up_to, or everything when both are null; p_scope limits a read up to a message, or of
-- everything, to the main timeline or a thread (receipts.in_scope). It answers, and leaves
-- behind, what receipts.mark_read_each does for the same request (SingleReadBatchTests), and
-- is made of the same rules: receipts.was_recipient, receipts.in_scope, the guard (receipts.has_read),
-- receipts.watermark_after and receipts.messages_to_read for the member row, and the unread
-- view. The member row is locked first, as there; the chunk rows are found by key and
-- updated in the same way as a request alone on its rows there (its guard checked against the
-- row itself). Its settings and plans as mark_read_each's, for the same reasons, and one more:
-- a generic plan takes a chat for about a row in a database of many tenants (or in one no
-- ANALYZE has seen), so any scan of a chat's rows looks as cheap as a lookup by key, and any
-- join order as cheap as another. So no plan here rests on those estimates. Named messages
-- are looked up one by one by their key (receipts.message_by_id), gathered first (a
-- materialized CTE), and their chunk rows are found without a join: by seq among the named
-- ones, within the span from the lowest named seq to the highest (one row's seq for a single
-- read), so that even a walk of the chat's chunk rows goes only over that span. A range goes
-- to receipts.mark_range_read, which merges the two ranges. (The two UPDATEs append a reader
-- alike, but find their rows differently on purpose: named messages merged over their span
-- like a range walked everything between them, 30 % slower for 10 ids scattered over 3,000.)
-- PlanReuseTests checks both, in a database of many tenants and in one never analyzed.
CREATE OR REPLACE FUNCTION receipts.mark_read(
    p_tenant text, p_chat text, p_user text, p_message_ids text[], p_up_to text, p_scope text DEFAULT NULL)
RETURNS TABLE (outcome text, marked integer, unread_count integer)
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET enable_sort = off SET jit = off
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_read_seq bigint;
    v_period_after bigint;
    v_chunk integer;
    v_last_seq bigint;
    v_visible boolean;
    v_up_to_seq bigint;
    v_marked integer;
    v_thread text;
    v_marked_unread boolean;
    v_search_from bigint;
    v_new_read_seq bigint;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    SELECT member.read_seq, member.period_after_seq, member.receipt_chunk, member.marked_unread, chat.last_seq,
           coalesce((SELECT setting.read_receipts FROM receipts.users AS setting
                     WHERE setting.tenant_id = p_tenant AND setting.user_id = p_user), true)
    INTO v_read_seq, v_period_after, v_chunk, v_marked_unread, v_last_seq, v_visible
    FROM receipts.chat_members AS member
    JOIN receipts.chats AS chat ON chat.tenant_id = p_tenant AND chat.chat_id = p_chat
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user AND member.left_at IS NULL
    FOR UPDATE OF member;
    IF NOT FOUND THEN
        RETURN QUERY SELECT CASE WHEN EXISTS (SELECT FROM receipts.chats AS chat
                                              WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat)
                                 THEN 'not_member' ELSE 'chat_not_found' END, 0, 0;
        RETURN;
    END IF;

    IF p_message_ids IS NOT NULL THEN
        WITH named AS MATERIALIZED (
            SELECT message.seq, message.thread_id
            FROM unnest(p_message_ids) AS item(message_id)
            CROSS JOIN LATERAL receipts.message_by_id(p_tenant, p_chat, item.message_id) AS message
            WHERE receipts.was_recipient(p_tenant, p_chat, p_user, message.sender_id, message.seq, v_period_after)
        ),
        updated AS (
            UPDATE receipts.receipt_chunks AS receipt SET
                read_by        = CASE WHEN v_visible THEN receipt.read_by || p_user ELSE receipt.read_by END,
                read_at        = CASE WHEN v_visible THEN receipt.read_at || now() ELSE receipt.read_at END,
                hidden_read_by = CASE WHEN v_visible THEN receipt.hidden_read_by ELSE receipt.hidden_read_by || p_user END,
                delivered_to   = CASE WHEN p_user = ANY (receipt.delivered_to) THEN receipt.delivered_to
                                      ELSE receipt.delivered_to || p_user END,
                delivered_at   = CASE WHEN p_user = ANY (receipt.delivered_to) THEN receipt.delivered_at
                                      ELSE receipt.delivered_at || now() END
            WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.chunk = v_chunk
              AND receipt.seq >= (SELECT min(named.seq) FROM named) AND receipt.seq <= (SELECT max(named.seq) FROM named)
              AND receipt.seq = ANY (ARRAY(SELECT named.seq FROM named))
              -- The guard (evaluated again on the newest version of a row another reader changed meanwhile).
              AND NOT receipts.has_read(p_user, receipt.read_by, receipt.hidden_read_by)
            RETURNING receipt.seq
        )
        SELECT (SELECT count(*) FROM updated),
               (SELECT CASE WHEN min(named.thread_id) = max(named.thread_id) THEN min(named.thread_id) END
                FROM named WHERE named.seq IN (SELECT updated.seq FROM updated))
        INTO v_marked, v_thread;
        v_search_from := receipts.read_search_from(v_read_seq, false, p_scope, NULL);
    ELSE
        -- Nested IFs: in `p_scope <> '' AND NOT EXISTS (…)` a null scope still runs the lookup.
        IF p_scope <> '' THEN
            IF NOT EXISTS (SELECT FROM receipts.message_by_id(p_tenant, p_chat, p_scope) AS root WHERE root.thread_id IS NULL) THEN
                RETURN QUERY SELECT 'thread_not_found', 0, 0;
                RETURN;
            END IF;
        END IF;
        IF p_up_to IS NULL THEN
            v_up_to_seq := v_last_seq;
        ELSE
            SELECT message.seq INTO v_up_to_seq FROM receipts.message_by_id(p_tenant, p_chat, p_up_to) AS message;
            IF NOT FOUND THEN
                RETURN QUERY SELECT 'message_not_found', 0, 0;
                RETURN;
            END IF;
        END IF;
        SELECT range.marked, range.thread INTO v_marked, v_thread
        FROM receipts.mark_range_read(p_tenant, p_chat, p_user, v_chunk, v_visible, v_read_seq, v_up_to_seq, p_scope,
                                      v_period_after) AS range;
        v_search_from := receipts.read_search_from(v_read_seq, true, p_scope, v_up_to_seq);
    END IF;

    -- The member row, as receipts.settle_reads settles it: when the read marked something or cleared a mark.
    -- The new watermark first, into a variable: given as an expression with a subquery in it,
    -- it kept receipts.messages_to_read from being inlined, and PostgreSQL planned that
    -- function's body again on every call (14 % of the database's CPU under single reads).
    IF v_marked > 0 OR v_marked_unread THEN
        SELECT watermark.seq INTO v_new_read_seq
        FROM receipts.watermark_after(p_tenant, p_chat, p_user, v_chunk, v_search_from, v_last_seq, v_period_after, true)
            AS watermark;
        UPDATE receipts.chat_members AS member SET
            read_seq      = v_new_read_seq,
            delivered_seq = greatest(member.delivered_seq, v_new_read_seq),
            reads_above   = member.reads_above + v_marked
                            - (SELECT passed.messages
                               FROM receipts.messages_to_read(p_tenant, p_chat, p_user, v_read_seq, v_new_read_seq,
                                                              v_period_after) AS passed),
            marked_unread = false,
            last_read_at  = CASE WHEN v_marked > 0 THEN now() ELSE member.last_read_at END,
            last_read_thread = CASE WHEN v_marked > 0 THEN v_thread ELSE member.last_read_thread END
        WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user;
    END IF;

    RETURN QUERY SELECT 'marked', v_marked, unread.unread_count FROM receipts.member_unread AS unread
                 WHERE unread.tenant_id = p_tenant AND unread.chat_id = p_chat AND unread.user_id = p_user;
END;
$$;
COMMENT ON FUNCTION receipts.mark_read(text, text, text, text[], text, text) IS
    'Marks messages read by a user (ids, or up to a message, or all when both are null; p_scope: null the whole chat, an empty string the main timeline, else a root''s thread): marked | not_member | message_not_found | thread_not_found | chat_not_found, with how many changed and the new unread count.';

CREATE OR REPLACE FUNCTION receipts.mark_delivered(
    p_tenant text, p_chat text, p_user text, p_message_ids text[], p_up_to text, p_scope text DEFAULT NULL)
RETURNS TABLE (outcome text, marked integer)
LANGUAGE plpgsql SET enable_sort = off SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_last_seq bigint;
    v_from_seq bigint;
    v_left_at timestamptz;
    v_chunk integer;
    v_period_after bigint;
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
    SELECT greatest(member.delivered_seq, member.read_seq), member.left_at, member.receipt_chunk, member.period_after_seq,
           receipts.membership_seqs(p_tenant, p_chat, p_user)
    INTO v_from_seq, v_left_at, v_chunk, v_period_after, v_recipient_of
    FROM receipts.chat_members AS member
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user
    FOR UPDATE;
    IF NOT FOUND OR v_left_at IS NOT NULL THEN
        RETURN QUERY SELECT 'not_member', 0;
        RETURN;
    END IF;
    IF p_up_to IS NOT NULL THEN
        SELECT message.seq INTO v_up_to_seq FROM receipts.message_by_id(p_tenant, p_chat, p_up_to) AS message;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'message_not_found', 0;
            RETURN;
        END IF;
    ELSE
        v_up_to_seq := v_last_seq;
    END IF;
    -- Nested IFs: in `p_scope <> '' AND NOT EXISTS (…)` a null scope still runs the lookup.
    IF p_scope <> '' THEN
        IF NOT EXISTS (SELECT FROM receipts.message_by_id(p_tenant, p_chat, p_scope) AS root WHERE root.thread_id IS NULL) THEN
            RETURN QUERY SELECT 'thread_not_found', 0;
            RETURN;
        END IF;
    END IF;

    IF p_message_ids IS NOT NULL THEN
        -- As in mark_read: the named messages by key, their chunk rows by seq within their span.
        WITH named AS MATERIALIZED (
            SELECT message.seq
            FROM unnest(p_message_ids) AS item(message_id)
            CROSS JOIN LATERAL receipts.message_by_id(p_tenant, p_chat, item.message_id) AS message
            WHERE message.sender_id <> p_user AND message.seq <@ v_recipient_of
        ),
        updated AS (
            UPDATE receipts.receipt_chunks AS receipt SET
                delivered_to = array_append(receipt.delivered_to, p_user),
                delivered_at = array_append(receipt.delivered_at, now())
            WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.chunk = v_chunk
              AND receipt.seq >= (SELECT min(named.seq) FROM named) AND receipt.seq <= (SELECT max(named.seq) FROM named)
              AND receipt.seq = ANY (ARRAY(SELECT named.seq FROM named))
              AND NOT (p_user = ANY (receipt.delivered_to))
            RETURNING 1
        )
        SELECT count(*) INTO v_marked FROM updated;
    ELSE
        v_marked := receipts.mark_range_delivered(p_tenant, p_chat, p_user, v_chunk, v_from_seq, v_up_to_seq, p_scope,
                                                  v_recipient_of);
    END IF;
    IF v_marked > 0 THEN
        SELECT chat.last_seq INTO v_last_seq FROM receipts.chats AS chat
        WHERE chat.tenant_id = p_tenant AND chat.chat_id = p_chat;
        UPDATE receipts.chat_members AS member
        SET delivered_seq = (SELECT watermark.seq
                             FROM receipts.watermark_after(p_tenant, p_chat, p_user, v_chunk, v_from_seq, v_last_seq,
                                                           v_period_after, false) AS watermark)
        WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.user_id = p_user;
    END IF;
    RETURN QUERY SELECT 'marked', v_marked;
END;
$$;
COMMENT ON FUNCTION receipts.mark_delivered(text, text, text, text[], text, text) IS
    'Marks messages delivered to a user (ids, or up to a message, or all; p_scope: null the whole chat, an empty string the main timeline, else a root''s thread): marked | not_member | message_not_found | thread_not_found | chat_not_found.';

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
