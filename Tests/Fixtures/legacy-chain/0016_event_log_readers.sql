-- 0016: the event log's readers (the hub and streams catching up) wait only for what may
-- still commit an event, and never skip what retention deleted under them.
--
-- 1. Waiting only for transactions that can still commit an event.
--
-- When the event hub finds a missing id below a visible one (a gap), it waits until every
-- transaction that may still commit that id has finished (0003_event_log.sql). It asked
-- receipts.running_transactions(), which lists every transaction of the whole cluster that
-- has an id (pg_locks is cluster-wide, and transaction-id locks carry no database): after one
-- rolled-back event id, a transaction open in another database of the same cluster, or an
-- idle-in-transaction psql session that never touched the event log, held every tenant's
-- live events back until it ended (measured: a message sent at t=0 reached an open stream at
-- t=8 s, when an unrelated transaction committed).
--
-- A transaction that holds an event id inserted its row in the statement that took the id
-- (the triggers' INSERT ... SELECT nextval(...)), and the INSERT locked receipts.events
-- (RowExclusiveLock, held to the end of the transaction) before it took the id. The id was
-- taken before the later id the reader saw had committed, so before the reader's read: right
-- after that read, every transaction that may still commit the missing id holds that lock, in
-- this database. receipts.event_writers() lists exactly those, with their transaction ids
-- and pids (for the hub's stall log line). A holder that has no transaction id yet (a manual
-- INSERT between its nextval() and its first row; the triggers always have one) comes with a
-- null transaction id: the hub asks again rather than wait on nothing. Prepared transactions
-- (two-phase commit) hold their locks under a virtual transaction of their own, and are
-- found the same way (pid null).
--
-- The function takes no lock and reads no table: pg_locks shows every lock, the fast-path
-- ones too, to every role.

CREATE FUNCTION receipts.event_writers()
RETURNS TABLE (transaction_id bigint, pid integer)
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
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
$$;
COMMENT ON FUNCTION receipts.event_writers() IS
    'Transactions of this database that hold a write lock on receipts.events (as xid8; null while one has no id yet), with their pids: the only ones that may still commit a missing event id.';
REVOKE ALL ON FUNCTION receipts.event_writers() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.event_writers() TO receipts_service;

-- 2. A resuming stream catches up from the log one page at a time (receipts.events_after).
-- Retention may delete the next events it needs between two pages; the page after would
-- then silently start later. receipts.retained_events_after reads the page and the tenant's
-- pruned_through in one statement, so in one snapshot: when pruned_through is past the
-- position asked for, events after it may be gone, and the hub sends the stream
-- resync.required instead of the rest (as it does at the start for an expired position).
CREATE FUNCTION receipts.retained_events_after(p_tenant text, p_after bigint, p_through bigint, p_limit integer)
RETURNS TABLE (pruned_through bigint, event_id bigint, transaction_id bigint, tenant_id text, type text, chat_id text,
               user_id text, message_ids text[], data jsonb, audience text[], occurred_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT coalesce((SELECT retention.pruned_through FROM receipts.event_retention AS retention
                     WHERE retention.tenant_id = p_tenant), 0),
           event.event_id, event.transaction_id::text::bigint, event.tenant_id::text, event.type, event.chat_id::text,
           event.user_id::text, event.message_ids, event.data, event.audience, event.occurred_at
    FROM (SELECT) AS one
    LEFT JOIN LATERAL (
        SELECT * FROM receipts.events AS event
        WHERE event.tenant_id = p_tenant AND event.event_id > p_after AND event.event_id <= p_through
        ORDER BY event.event_id
        LIMIT p_limit
    ) AS event ON true
    ORDER BY event.event_id;
END;
$$;
COMMENT ON FUNCTION receipts.retained_events_after(text, bigint, bigint, integer) IS
    'A tenant''s events in (p_after, p_through], oldest first, each row with the newest id of the tenant that retention deleted, read in one snapshot (one row of nulls and pruned_through when there are none).';
