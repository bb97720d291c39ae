-- The event log's readers and writers' helpers. (The triggers that write events are in
-- sql/triggers/events.sql; the tables and sequences in the baseline migration.)
--
-- Ordering without a lock: event ids come from one sequence, so writers never wait for
-- each other, but transactions commit out of order: id 7 may be visible while id 6 is
-- still in flight. Each event records its transaction (taken before its id), and readers
-- (the service's EventHub) read with pg_current_snapshot():
--   * the ids up to a position P are complete once every id <= P is either visible or
--     provably never will be;
--   * a missing id g below a visible one (a gap) was taken by a transaction that may still
--     commit it. Such a transaction inserted its row in the statement that took the id (the
--     triggers' INSERT ... SELECT nextval(...)), and the INSERT locked receipts.events
--     (RowExclusiveLock, held to the end of the transaction) before it took the id; the id
--     was taken before the later id the reader saw had committed, so before the reader's
--     read. Right after that read, every transaction that may still commit g holds that
--     lock, in this database: receipts.event_writers lists exactly those. (pg_locks is
--     cluster-wide: a transaction in another database, or a psql session idle in a
--     transaction that never touched the log, would otherwise hold every tenant's live
--     events back.) Once all of them have finished, g either became visible or never will:
--     the reader moves past it.
-- So a stream position means "every event up to here", and a client that resumes from it
-- gets each later event exactly once. This is PgQ's snapshot rule applied per gap; unlike a
-- per-tenant counter row locked until commit, it lets one tenant's writers commit in
-- parallel (group commit).
--
-- The wait at a gap is bounded. A transaction that took an event id and stays open (psql:
-- BEGIN; SELECT receipts.mark_read(...); and then nothing, as a superuser the service cannot
-- terminate) must not hold every tenant's live events back: after a deadline
-- (EventHub.Options.abandonGapsAfter) the hub abandons the missing ids, and if that
-- transaction commits later, its events move to fresh ids above them as it commits, so
-- readers get them after the gap, exactly once:
--   * receipts.abandoned_event_ids holds the abandon horizon H (0 at first; it only grows).
--   * Every transaction that inserted events checks them at commit, in a deferred constraint
--     trigger (receipts.renumber_abandoned_events): it takes advisory lock K in share mode
--     (held to the end of the transaction), reads H, and moves each of its events with an
--     id <= H to a fresh id from receipts.event_ids, in the order they were written. Fresh
--     ids are above H: H is never set beyond the last id handed out, and the sequence only
--     grows.
--   * The hub calls receipts.abandon_event_ids(V), V the newest id it has seen: it takes
--     lock K alone, which waits only for the writers that are committing right now (idle ones
--     take the share lock only as they commit), raises H to V and commits. Then it reads the
--     log again, in a snapshot in which that call had finished (it compares the call's
--     transaction id), and moves past every id <= H that is still missing.
-- Why that is safe: for a missing id m <= H, its transaction either (a) passed the check
-- before the hub took K: the hub waited for it to commit, so it is visible in the hub's next
-- read (or rolled back); (b) checks after the hub released K: it reads the new H and moves
-- its events above H, so id m never becomes visible; (c) never commits: nothing to deliver.
-- Its new ids are handed out after every id any reader has passed, so every instance
-- delivers them later, once, as an event that committed late.
-- What keeps K from being held long: only the commit-time check takes it. A transaction that
-- ran the check early (SET CONSTRAINTS ALL IMMEDIATE) or a prepared one holds K until it
-- ends: the hub's call then gives up after its lock_timeout (200 ms) and the hub keeps
-- waiting, and tries again after another deadline. Nothing is skipped on a failed call.
-- K is the advisory lock key 8242555388271095923 (the ASCII bytes of "rcptgaps"), in this
-- database only (advisory locks are per database). Nothing else may use it.
--
-- Notifications. A transaction that calls pg_notify takes one database-wide lock at commit
-- and holds it until its commit record is flushed, so every notifying transaction commits
-- alone, one WAL flush after another (pgbench on a 2-core machine: a one-row UPDATE commits
-- 7,700 times a second alone, 2,100 times with a pg_notify beside it). So a session may turn
-- the triggers' NOTIFY off with the setting receipts.notify = 'off': the service does on its
-- pool's sessions, wakes its own event hub right after each write commits, and tells other
-- instances with one NOTIFY of its own at a time (EventHub.followCommittedWrites). Sessions
-- without the setting (psql, scripts, other tools) notify from the triggers.

CREATE OR REPLACE FUNCTION receipts.wake_listeners() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('receipts.notify', true) IS DISTINCT FROM 'off' THEN
        PERFORM pg_notify('receipts_events', '');
    END IF;
END;
$$;
COMMENT ON FUNCTION receipts.wake_listeners() IS
    'NOTIFY receipts_events, unless the session set receipts.notify = off (the service announces its own writes).';

-- Who sees an event of a chat (its audience): the users whose membership covered the chat's
-- version when it happened (receipts.chats.audience_version, stored with the event; see
-- sql/migrations/0008_event_audiences.sql). SQL returning a table, so that the readers of the
-- log inline it (`(SELECT audience.audience FROM receipts.audience_at(t, c, v) AS audience)`).
CREATE OR REPLACE FUNCTION receipts.audience_at(p_tenant text, p_chat text, p_version integer)
RETURNS TABLE (audience text[])
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(period.user_id::text ORDER BY period.user_id), '{}')
    FROM receipts.audience_periods AS period
    WHERE period.tenant_id = p_tenant AND period.chat_id = p_chat AND period.from_version <= p_version
      AND (period.until_version IS NULL OR period.until_version > p_version);
$$;
COMMENT ON FUNCTION receipts.audience_at(text, text, integer) IS
    'The members of a chat at one of its audience versions, in one array: who sees the events stored with that version. Read as (SELECT audience.audience FROM receipts.audience_at(t, c, v) AS audience).';

-- An event's audience in a page of the log: its own array (an event of one user, or from
-- before sql/migrations/0008_event_audiences.sql), or the members of its chat's audience
-- version (receipts.audience_at), found once a page: on the page's first event of that chat
-- and version, null on the later ones (p_first false), whose reader takes the first's.
-- Inlined into the statement that reads it.
CREATE OR REPLACE FUNCTION receipts.page_audience(
    p_tenant text, p_chat text, p_audience text[], p_version integer, p_first boolean)
RETURNS TABLE (audience text[])
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_version IS NULL THEN coalesce(p_audience, '{}')
                WHEN p_first THEN (SELECT members.audience FROM receipts.audience_at(p_tenant, p_chat, p_version) AS members)
           END;
$$;
COMMENT ON FUNCTION receipts.page_audience(text, text, text[], integer, boolean) IS
    'An event''s audience in a page of the log: its stored array, or its chat version''s members on the page''s first event of that version (null on the later ones). Read as (SELECT page.audience FROM receipts.page_audience(...) AS page).';

-- The listener reads every tenant's events (it relays to all of them), so this runs as the
-- owner, beyond row-level security. Always one row: the current event history
-- (sql/functions/histories.sql: the reader must know which history the ids are of, and a
-- new one may begin here), the snapshot the read used, then the events (null columns when
-- there are none), each with its audience as receipts.page_audience gives it, and the trace
-- parent of the traced batch that wrote it (null when untraced).
CREATE OR REPLACE FUNCTION receipts.events_since(p_after bigint, p_limit integer)
RETURNS TABLE (history_id text, snapshot text, event_id bigint, transaction_id bigint, tenant_id text, type text,
               chat_id text, user_id text, message_ids text[], data jsonb, audience text[], audience_version integer,
               occurred_at timestamptz, trace_parent text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_history text := receipts.current_event_history();
BEGIN
    RETURN QUERY
    SELECT v_history, pg_current_snapshot()::text, event.event_id, event.transaction_id::text::bigint,
           event.tenant_id::text, event.type, event.chat_id::text, event.user_id::text, event.message_ids, event.data,
           (SELECT page.audience FROM receipts.page_audience(
               event.tenant_id, event.chat_id, event.audience, event.audience_version, event.first_of_version) AS page),
           event.audience_version, event.occurred_at, event.trace_parent
    FROM (SELECT) AS one
    LEFT JOIN LATERAL (
        SELECT page.*, row_number() OVER (PARTITION BY page.tenant_id, page.chat_id, page.audience_version
                                          ORDER BY page.event_id) = 1 AS first_of_version
        FROM (SELECT * FROM receipts.events AS event WHERE event.event_id > p_after ORDER BY event.event_id LIMIT p_limit) AS page
    ) AS event ON true
    ORDER BY event.event_id;
END;
$$;
COMMENT ON FUNCTION receipts.events_since(bigint, integer) IS
    'Every tenant''s visible events after a position, in id order, with the current event history and the snapshot that decided what is visible; audiences as receipts.page_audience gives them.';
REVOKE ALL ON FUNCTION receipts.events_since(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.events_since(bigint, integer) TO receipts_service;

-- Every transaction that has an id and is running now, as xid8 (pg_locks shows 32-bit
-- ids: the epoch comes from the current snapshot; running ids are within 2^31 of it).
CREATE OR REPLACE FUNCTION receipts.running_transactions()
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (
        WITH current AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next),
        running AS (
            SELECT ((current.next >> 32) << 32) + lock.transactionid::text::bigint AS candidate, current.next
            FROM pg_locks AS lock, current
            WHERE lock.locktype = 'transactionid' AND lock.mode = 'ExclusiveLock' AND lock.granted
        )
        SELECT coalesce(array_agg(DISTINCT CASE
                   WHEN candidate > next + 2147483648 THEN candidate - 4294967296
                   WHEN candidate < next - 2147483648 THEN candidate + 4294967296
                   ELSE candidate END), '{}')
        FROM running);
END;
$$;
COMMENT ON FUNCTION receipts.running_transactions() IS
    'Every running transaction that has an id (from pg_locks), as xid8: what a missing event id may still be waiting for.';

-- Takes no lock and reads no table: pg_locks shows every lock, the fast-path ones too, to every
-- role. PL/pgSQL, as receipts.running_transactions, so that its plan is kept for the session:
-- the hub asks while it waits at a gap, and as a SQL function with a SET clause (never
-- inlined) its body was planned on every call (1,830 against 3,300 calls/s). A holder that
-- has no transaction id yet (a manual INSERT between its nextval() and its
-- first row; the triggers always have one) comes with a null transaction id: the hub asks
-- again rather than wait on nothing. Prepared transactions hold their locks under a virtual
-- transaction of their own, and are found the same way (pid null).
CREATE OR REPLACE FUNCTION receipts.event_writers()
RETURNS TABLE (transaction_id bigint, pid integer)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH current AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next),
    writers AS (
        SELECT DISTINCT lock.virtualtransaction, lock.pid
        FROM pg_locks AS lock
        WHERE lock.locktype = 'relation' AND lock.granted AND lock.mode = 'RowExclusiveLock'
          AND lock.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND lock.relation = 'receipts.events'::regclass
    ),
    transactions AS (
        SELECT writer.pid, ((current.next >> 32) << 32) + xid_lock.transactionid::text::bigint AS candidate, current.next
        FROM writers AS writer
        CROSS JOIN current
        LEFT JOIN pg_locks AS xid_lock
               ON xid_lock.virtualtransaction = writer.virtualtransaction
              AND xid_lock.locktype = 'transactionid' AND xid_lock.mode = 'ExclusiveLock' AND xid_lock.granted
    )
    -- pg_locks shows 32-bit ids: the epoch comes from the current snapshot; running ids are
    -- within 2^31 of it (as in receipts.running_transactions).
    SELECT CASE
               WHEN candidate IS NULL THEN NULL
               WHEN candidate > next + 2147483648 THEN candidate - 4294967296
               WHEN candidate < next - 2147483648 THEN candidate + 4294967296
               ELSE candidate END,
           pid
    FROM transactions
    WHERE pid IS DISTINCT FROM pg_backend_pid();
END;
$$;
COMMENT ON FUNCTION receipts.event_writers() IS
    'Transactions of this database that hold a write lock on receipts.events (as xid8; null while one has no id yet), with their pids: the only ones that may still commit a missing event id.';
REVOKE ALL ON FUNCTION receipts.event_writers() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.event_writers() TO receipts_service;

-- Where the hub starts: the current event history, the newest visible event, and the
-- snapshot that decided it (the hub then asks receipts.event_writers what may still commit a
-- lower id).
CREATE OR REPLACE FUNCTION receipts.newest_event()
RETURNS TABLE (history_id text, snapshot text, newest_visible bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_history text := receipts.current_event_history();
BEGIN
    RETURN QUERY
    SELECT v_history, pg_current_snapshot()::text, coalesce((SELECT max(event.event_id) FROM receipts.events AS event), 0);
END;
$$;
COMMENT ON FUNCTION receipts.newest_event() IS
    'The current event history, the newest visible event id (0 when there is none), and the snapshot it was read in.';
REVOKE ALL ON FUNCTION receipts.newest_event() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.newest_event() TO receipts_service;

-- Where a stream of a tenant starts: the current event history, the snapshot of the moment
-- (events committed by then are not sent to a new stream), and which positions it may
-- resume from.
CREATE OR REPLACE FUNCTION receipts.stream_position(p_tenant text)
RETURNS TABLE (history_id text, snapshot text, last_allocated bigint, pruned_through bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_history text := receipts.current_event_history();
BEGIN
    RETURN QUERY
    SELECT v_history, pg_current_snapshot()::text,
           coalesce(pg_sequence_last_value('receipts.event_ids'), 0),
           coalesce((SELECT retention.pruned_through FROM receipts.event_retention AS retention
                     WHERE retention.tenant_id = p_tenant), 0);
END;
$$;
COMMENT ON FUNCTION receipts.stream_position(text) IS
    'For a new stream: the current event history and snapshot, the last event id handed out, and the newest id of the tenant that retention deleted.';
REVOKE ALL ON FUNCTION receipts.stream_position(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.stream_position(text) TO receipts_service;

-- A resuming stream catches up from the log one page at a time.
-- Retention may delete the next events it needs between two pages; the page after would
-- then silently start later. receipts.retained_events_after reads the page and the tenant's
-- pruned_through in one statement, so in one snapshot: when pruned_through is past the
-- position asked for, events after it may be gone, and the hub sends the stream
-- resync.required instead of the rest (as it does at the start for an expired position).
-- The page also says which event history it was read in: a page read after a failover is
-- not of the history the hub's positions are in (sql/functions/histories.sql).
CREATE OR REPLACE FUNCTION receipts.retained_events_after(p_tenant text, p_after bigint, p_through bigint, p_limit integer)
RETURNS TABLE (history_id text, pruned_through bigint, event_id bigint, transaction_id bigint, tenant_id text, type text,
               chat_id text, user_id text, message_ids text[], data jsonb, audience text[], audience_version integer,
               occurred_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_history text := receipts.current_event_history();
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT v_history,
           coalesce((SELECT retention.pruned_through FROM receipts.event_retention AS retention
                     WHERE retention.tenant_id = p_tenant), 0),
           event.event_id, event.transaction_id::text::bigint, event.tenant_id::text, event.type, event.chat_id::text,
           event.user_id::text, event.message_ids, event.data,
           (SELECT page.audience FROM receipts.page_audience(
               event.tenant_id, event.chat_id, event.audience, event.audience_version, event.first_of_version) AS page),
           event.audience_version, event.occurred_at
    FROM (SELECT) AS one
    LEFT JOIN LATERAL (
        SELECT page.*, row_number() OVER (PARTITION BY page.chat_id, page.audience_version ORDER BY page.event_id) = 1
                   AS first_of_version
        FROM (SELECT * FROM receipts.events AS event
              WHERE event.tenant_id = p_tenant AND event.event_id > p_after AND event.event_id <= p_through
              ORDER BY event.event_id
              LIMIT p_limit) AS page
    ) AS event ON true
    ORDER BY event.event_id;
END;
$$;
COMMENT ON FUNCTION receipts.retained_events_after(text, bigint, bigint, integer) IS
    'A tenant''s events in (p_after, p_through], oldest first, each row with the current event history and the newest id of the tenant that retention deleted, read in one snapshot (one row of nulls, the history and pruned_through when there are none); audiences as receipts.page_audience gives them.';

-- The same page without the history and retention (for psql and tests).
CREATE OR REPLACE FUNCTION receipts.events_after(p_tenant text, p_after bigint, p_through bigint, p_limit integer)
RETURNS TABLE (event_id bigint, transaction_id bigint, tenant_id text, type text, chat_id text, user_id text,
               message_ids text[], data jsonb, audience text[], audience_version integer, occurred_at timestamptz)
LANGUAGE sql AS $$
    SELECT page.event_id, page.transaction_id, page.tenant_id, page.type, page.chat_id, page.user_id, page.message_ids,
           page.data, page.audience, page.audience_version, page.occurred_at
    FROM receipts.retained_events_after(p_tenant, p_after, p_through, p_limit) AS page
    WHERE page.event_id IS NOT NULL;
$$;
COMMENT ON FUNCTION receipts.events_after(text, bigint, bigint, integer) IS
    'A tenant''s events in (p_after, p_through], oldest first: what a resuming stream replays (audiences as receipts.page_audience gives them).';

-- The trace parents of a tenant's events (receipts.events.trace_parent): where a webhook's
-- delivery of them continues their traces, when the service traces. Only events that have
-- one; p_events is a webhook batch's ids (at most a few hundred).
CREATE OR REPLACE FUNCTION receipts.event_trace_parents(p_tenant text, p_events bigint[])
RETURNS TABLE (event_id bigint, trace_parent text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT event.event_id, event.trace_parent
    FROM receipts.events AS event
    WHERE event.tenant_id = p_tenant AND event.event_id = ANY (p_events) AND event.trace_parent IS NOT NULL
    ORDER BY event.event_id;
END;
$$;
COMMENT ON FUNCTION receipts.event_trace_parents(text, bigint[]) IS
    'The W3C traceparent of each of a tenant''s events that has one, oldest first: what their webhook delivery continues.';

-- Retention, across tenants: runs as the function's owner, beyond row-level security.
CREATE OR REPLACE FUNCTION receipts.prune_events(p_retention interval)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH pruned AS (
        DELETE FROM receipts.events WHERE occurred_at < now() - p_retention RETURNING tenant_id, event_id
    ),
    -- An event of a version that a period covers happened before the period ended (a
    -- transaction that read the version began before the leave committed): a day's margin
    -- for the leave's own transaction, and the periods no retained event needs go too.
    ended AS (
        DELETE FROM receipts.audience_periods AS period WHERE period.left_at < now() - p_retention - interval '1 day'
    ),
    -- The webhooks' attempt logs go with the events they tried to deliver.
    attempts AS (
        DELETE FROM receipts.webhook_attempts AS attempt WHERE attempt.attempted_at < now() - p_retention
    ),
    recorded AS (
        INSERT INTO receipts.event_retention AS retention (tenant_id, pruned_through)
        SELECT tenant_id, max(event_id) FROM pruned GROUP BY tenant_id
        ON CONFLICT (tenant_id) DO UPDATE
            SET pruned_through = greatest(retention.pruned_through, excluded.pruned_through)
        RETURNING 1
    )
    SELECT count(*) FROM pruned;
$$;
COMMENT ON FUNCTION receipts.prune_events(interval) IS
    'Deletes events older than the retention period (default 7 days in the service), the webhook attempts as old, and the audience periods that ended a day before it; records, per tenant, the newest id it deleted; returns how many events.';
REVOKE ALL ON FUNCTION receipts.prune_events(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.prune_events(interval) TO receipts_service;

-- The rare path: one event moves to a fresh id. As the owner, with the event's tenant set for
-- the transaction's rest of the commit, so row-level security (even if forced) finds the row
-- whatever tenant the transaction set last; a row the transaction itself deleted is not there.
-- Only the calling transaction's own events move.
CREATE OR REPLACE FUNCTION receipts.renumber_abandoned_event(p_tenant text, p_event_id bigint)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_tenant text := current_setting('receipts.tenant_id', true);
BEGIN
    PERFORM set_config('receipts.tenant_id', p_tenant, true);
    UPDATE receipts.events SET event_id = nextval('receipts.event_ids')
    WHERE tenant_id = p_tenant AND event_id = p_event_id AND transaction_id = pg_current_xact_id();
    PERFORM set_config('receipts.tenant_id', coalesce(v_tenant, ''), true);
END;
$$;
COMMENT ON FUNCTION receipts.renumber_abandoned_event(text, bigint) IS
    'Moves one event of the committing transaction to a fresh id (its id was abandoned by the event hub; see sql/functions/events.sql).';
REVOKE ALL ON FUNCTION receipts.renumber_abandoned_event(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.renumber_abandoned_event(text, bigint) TO receipts_service;

-- The hub's side. Raises the horizon to p_through (never beyond the last id handed out, so
-- renumbered ids are above it), once every writer that is committing now has finished;
-- returns the horizon and this call's transaction id: a read of the log whose snapshot shows
-- that transaction finished sees every event that will ever have an id up to the horizon.
CREATE OR REPLACE FUNCTION receipts.abandon_event_ids(p_through bigint)
RETURNS TABLE (abandoned_through bigint, transaction_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '200ms' AS $$
DECLARE
    v_horizon bigint;
    v_through bigint := least(p_through, coalesce(pg_sequence_last_value('receipts.event_ids'), 0));
BEGIN
    PERFORM pg_advisory_xact_lock(8242555388271095923);
    SELECT horizon.last_value INTO v_horizon FROM receipts.abandoned_event_ids AS horizon;
    IF v_through > v_horizon THEN
        PERFORM setval('receipts.abandoned_event_ids', v_through);
        v_horizon := v_through;
    END IF;
    RETURN QUERY SELECT v_horizon, pg_current_xact_id()::text::bigint;
END;
$$;
COMMENT ON FUNCTION receipts.abandon_event_ids(bigint) IS
    'The event hub gives up waiting for event ids up to p_through that are still missing: a transaction that commits them later moves them to fresh ids (see sql/functions/events.sql). Returns the horizon and this transaction''s id.';
REVOKE ALL ON FUNCTION receipts.abandon_event_ids(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.abandon_event_ids(bigint) TO receipts_service;
