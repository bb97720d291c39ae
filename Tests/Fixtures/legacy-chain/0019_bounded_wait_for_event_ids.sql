-- 0019: the event hub's wait at a missing event id is bounded. A transaction that took an
-- event id and stays open (psql: BEGIN; SELECT receipts.mark_read(...); and then nothing, as a
-- superuser the service cannot terminate) no longer holds every tenant's live events back: after
-- a deadline the hub abandons the missing ids, and if that transaction commits later, its events
-- move to fresh ids above them as it commits, so readers get them after the gap, exactly once.
--
-- The rule.
-- * receipts.abandoned_event_ids holds the abandon horizon H (0 at first; it only grows). A
--   sequence, not a table row: setval is seen at once by every transaction, whatever its
--   snapshot (a REPEATABLE READ writer would not see a newer row of a table), and reading it
--   writes nothing.
-- * Every transaction that inserted events checks them at commit, in a deferred constraint
--   trigger (receipts.renumber_abandoned_events): it takes advisory lock K in share mode (held to
--   the end of the transaction), reads H, and moves each of its events with an id <= H to a
--   fresh id from receipts.event_ids, in the order they were written. Fresh ids are above H:
--   H is never set beyond the last id handed out (below), and the sequence only grows.
-- * The hub, after waiting its deadline (EventHub.Options.abandonGapsAfter) at a missing id,
--   calls receipts.abandon_event_ids(V), V the newest id it has seen: it takes lock K alone,
--   which waits only for the writers that are committing right now (idle ones take the
--   share lock only as they commit), raises H to V and commits. Then it reads the log again,
--   in a snapshot in which that call had finished (it compares the call's transaction id),
--   and moves past every id <= H that is still missing.
--
-- Why that is safe: for a missing id m <= H, its transaction either
--   (a) passed the check before the hub took K: the hub waited for it to commit and release
--       K, so it is visible in the hub's next read (or rolled back);
--   (b) checks after the hub released K: it reads the new H and moves its events above H,
--       so id m never becomes visible: the reader skipped nothing;
--   (c) never commits: nothing to deliver.
-- Its new ids are handed out after every id any reader has passed, so every reader (every
-- instance: H is in the database) delivers them later, once, as an event that committed late;
-- a client resuming from any position gets them after it. A stream position still means
-- "every event up to here". The transaction's NOTIFY (psql: from the triggers; the service:
-- its own after the commit) comes after the renumbered rows are committed, as before.
--
-- What keeps K from being held long: only the commit-time check takes it, for the end of its
-- transaction. A transaction that ran the check early (SET CONSTRAINTS ALL IMMEDIATE) or a
-- prepared one (PREPARE TRANSACTION runs the check and keeps K) holds K until it ends: the
-- hub's call then gives up after its lock_timeout (200 ms; writers that begin to commit queue
-- behind the hub's request that long at most) and the hub keeps waiting, as it did before,
-- and tries again after another deadline. Nothing is ever skipped on a failed call: the hub
-- moves on only after a call returned.
--
-- K is the advisory lock key 8242555388271095923 (the ASCII bytes of "rcptgaps"), in this
-- database only (advisory locks are per database). Nothing else may use it.
--
-- Cost: one more trigger call per event row, at commit (a plpgsql call, the share lock, taken
-- again by the same transaction only as a local counter, one read of a one-row sequence).
-- Measured on the 2-core machine (PostgreSQL 15): 50,000 event rows in one transaction commit
-- in about 300 ms more (6 us a row); one session alternating send_message and mark_read
-- (3 event rows per pair, receipts.notify off as in the service), 6,000 statements, trigger
-- disabled and enabled in interleaved pairs: backend CPU 1,818 and 1,844 ticks over seven
-- pairs (+1.4 %; single pairs -9 % to +12 %, the machine's noise), about 0.6 ms a statement.
-- A cheaper check is hardly possible: a constraint trigger is always per row, and its WHEN
-- is evaluated when the row is inserted, not at commit.

CREATE SEQUENCE receipts.abandoned_event_ids AS bigint MINVALUE 0 START 0;
COMMENT ON SEQUENCE receipts.abandoned_event_ids IS
    'Abandon horizon: event ids up to last_value that were still missing when the hub raised it will never be visible; a late transaction holding such ids renumbers its events above it at commit (0019).';
GRANT SELECT ON SEQUENCE receipts.abandoned_event_ids TO PUBLIC;

-- The rare path: one event moves to a fresh id. As the owner, with the event's tenant set for
-- the transaction's rest of the commit, so row-level security (even if forced) finds the row
-- whatever tenant the transaction set last; a row the transaction itself deleted is not there.
-- Only the calling transaction's own events move.
CREATE FUNCTION receipts.renumber_abandoned_event(p_tenant text, p_event_id bigint)
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
    'Moves one event of the committing transaction to a fresh id (its id was abandoned by the event hub; 0019).';
REVOKE ALL ON FUNCTION receipts.renumber_abandoned_event(text, bigint) FROM PUBLIC;

-- The common path, per event row at commit: the share lock (a local counter after the first
-- row of a transaction) and one read of the horizon. Invoker's rights and no SET clause: both
-- would cost on every row.
CREATE FUNCTION receipts.renumber_abandoned_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(8242555388271095923);
    IF NEW.event_id <= (SELECT horizon.last_value FROM receipts.abandoned_event_ids AS horizon) THEN
        PERFORM receipts.renumber_abandoned_event(NEW.tenant_id, NEW.event_id);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION receipts.renumber_abandoned_events() IS
    'Trigger at commit: events whose ids the hub abandoned meanwhile move to fresh ids (0019).';
GRANT EXECUTE ON FUNCTION receipts.renumber_abandoned_event(text, bigint) TO receipts_service;

CREATE CONSTRAINT TRIGGER renumber_abandoned_events
    AFTER INSERT ON receipts.events
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION receipts.renumber_abandoned_events();

-- The hub's side. Raises the horizon to p_through (never beyond the last id handed out, so
-- renumbered ids are above it), once every writer that is committing now has finished;
-- returns the horizon and this call's transaction id: a read of the log whose snapshot shows
-- that transaction finished sees every event that will ever have an id up to the horizon.
CREATE FUNCTION receipts.abandon_event_ids(p_through bigint)
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
    'The event hub gives up waiting for event ids up to p_through that are still missing: a transaction that commits them later moves them to fresh ids (0019). Returns the horizon and this transaction''s id.';
REVOKE ALL ON FUNCTION receipts.abandon_event_ids(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.abandon_event_ids(bigint) TO receipts_service;
