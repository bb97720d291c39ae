-- Event histories: why a stream position names the history it belongs to, and how a new one
-- begins. (The table: sql/migrations/0005_event_histories.sql.)
--
-- A failover that promotes an asynchronous standby loses what the standby had not received:
-- events clients already got, and the sequence's values with them, so the new primary hands
-- out those ids again for other events. Nothing in the data says so afterwards. So:
--   * Each history of the database is a row of receipts.event_histories, and the current one
--     is the newest row, as long as it was made on this cluster (system identifier) and WAL
--     timeline. A promotion starts a new timeline, a logical restore runs on a new cluster:
--     the first transaction that writes an event there, or the event hub's first read,
--     finds the newest row made elsewhere and begins a new history (receipts.current_event_history).
--     (A restore that keeps both, a copy of the data directory restored in place, is told by
--     the operator: receipts.begin_event_history, docs/operations.md.)
--   * Event ids above started_after belong to the new history: its event ids are shown with
--     ".<history_id>" after the number; ids at or below it keep the name they had. A new
--     history raises the abandon horizon (sql/functions/events.sql) to started_after, the
--     sequence's value when it began: a transaction of the new history that took an event id
--     before that, and commits after, moves its events to fresh ids above it, as it does for
--     an abandoned id. (None can have committed before: it would have begun the history.)
--   * resumable_through says which positions of the earlier history mean the same here. A
--     position P was handed out by a hub once every event up to P was visible or would never
--     be; a client at P has seen every event up to P. Those events are here if no event id up
--     to P is missing here that the earlier history had. The hub records its position every
--     second (settled_through: every event up to it was visible then, and that write came
--     after their commits in the WAL, so a history that has the write has them all); from
--     there, the new history counts the event ids it has without a gap, up to its newest
--     one. A missing id may have been lost, or rolled back long ago: either way positions
--     past it answer resync.required (a rollback in the last second before a failover costs
--     some clients a resync they did not need; nothing is ever skipped).
--   * A resync.required is always safe: the client reloads what it shows from the API and
--     goes on from the id it carries.
-- Cost: the triggers' commit-time check (sql/triggers/events.sql) compares the WAL timeline
-- with the one this session last checked (a setting), per event row; each read of the log
-- reads the newest history's id and compares it with what the session checked last; the
-- rest runs once per session and once per history.
-- The advisory lock key 8242555388271095924 ("rcpthist" as a number, one above the abandon
-- lock's) serialises the beginning of a history, in this database only. Nothing else may use it.

-- The WAL timeline this server writes on, as the 8 hex digits that begin WAL file names.
CREATE OR REPLACE FUNCTION receipts.wal_timeline() RETURNS text
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8);
$$;
COMMENT ON FUNCTION receipts.wal_timeline() IS 'The WAL timeline this server writes on (8 hex digits): a promotion changes it.';

-- The current history's id. The common path reads the newest history's id and compares it,
-- with the WAL timeline, to what this session last checked (the setting
-- receipts.event_history_checked, "<history id>@<timeline>"): invoker's rights and no SET
-- clause, which would cost on every read of the log. Anything else goes to
-- receipts.enter_event_history, which checks the cluster and the timeline and begins a new
-- history when the newest was made elsewhere.
CREATE OR REPLACE FUNCTION receipts.current_event_history() RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_newest text;
BEGIN
    SELECT history.history_id INTO v_newest FROM receipts.event_histories AS history ORDER BY history.ordinal DESC LIMIT 1;
    IF pg_catalog.current_setting('receipts.event_history_checked', true)
        IS NOT DISTINCT FROM v_newest || '@' || pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8)
    THEN
        RETURN v_newest;
    END IF;
    RETURN receipts.enter_event_history();
END;
$$;
COMMENT ON FUNCTION receipts.current_event_history() IS
    'The current event history''s id, beginning a new history when the database now runs on another cluster or WAL timeline than the newest one (see sql/functions/histories.sql).';
REVOKE ALL ON FUNCTION receipts.current_event_history() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.current_event_history() TO receipts_service;

-- The current history's id, checked: the newest history was made on this cluster (system
-- identifier, read from the control file once a session) and WAL timeline, or a new one
-- begins now. As the owner: it reads every tenant's event ids (ids only) and writes the
-- histories. Remembers what it checked in the session settings receipts.event_history_checked
-- and receipts.event_history_timeline (the commit-time check's), reset with the transaction
-- if it rolls back.
CREATE OR REPLACE FUNCTION receipts.enter_event_history() RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_timeline text := receipts.wal_timeline();
    v_system bigint := nullif(current_setting('receipts.event_history_system', true), '')::bigint;
    v_newest receipts.event_histories;
BEGIN
    IF v_system IS NULL THEN
        -- Reads the control file: once a session (a session lives on one cluster).
        SELECT control.system_identifier INTO v_system FROM pg_control_system() AS control;
        PERFORM set_config('receipts.event_history_system', v_system::text, false);
    END IF;
    SELECT * INTO v_newest FROM receipts.event_histories ORDER BY ordinal DESC LIMIT 1;
    IF v_newest.system_identifier IS DISTINCT FROM v_system
        OR v_newest.timeline IS DISTINCT FROM ('x' || v_timeline)::bit(32)::bigint THEN
        PERFORM pg_advisory_xact_lock(8242555388271095924);
        -- Another transaction may have begun it meanwhile (a new statement: a new snapshot).
        SELECT * INTO v_newest FROM receipts.event_histories ORDER BY ordinal DESC LIMIT 1;
        IF v_newest.system_identifier IS DISTINCT FROM v_system
            OR v_newest.timeline IS DISTINCT FROM ('x' || v_timeline)::bit(32)::bigint THEN
            v_newest := receipts.begin_history_locked(
                CASE WHEN v_newest.system_identifier IS DISTINCT FROM v_system THEN 'new cluster' ELSE 'new timeline' END);
        END IF;
    END IF;
    PERFORM set_config('receipts.event_history_timeline', v_timeline, false);
    PERFORM set_config('receipts.event_history_checked', v_newest.history_id || '@' || v_timeline, false);
    RETURN v_newest.history_id;
END;
$$;
COMMENT ON FUNCTION receipts.enter_event_history() IS
    'The current event history''s id, after checking that the newest history was made on this cluster and WAL timeline (else beginning a new one); see sql/functions/histories.sql.';
REVOKE ALL ON FUNCTION receipts.enter_event_history() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.enter_event_history() TO receipts_service;

-- Begins a history (the caller holds the advisory lock): what the previous one kept, where
-- its ids end, and the abandon horizon raised to there. Returns the new row.
CREATE OR REPLACE FUNCTION receipts.begin_history_locked(p_reason text) RETURNS receipts.event_histories
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_previous receipts.event_histories;
    v_row receipts.event_histories;
    v_from bigint;
    v_newest bigint;
    v_kept bigint;
BEGIN
    SELECT * INTO v_previous FROM receipts.event_histories ORDER BY ordinal DESC LIMIT 1;
    -- Every event of every tenant (ids only), whoever called: row-level security is forced
    -- on the log, so the owner needs the setting too (the function's SET clause puts it back
    -- as it was when the function returns).
    PERFORM set_config('receipts.all_tenants', 'on', true);
    v_from := coalesce(greatest(v_previous.resumable_through, v_previous.settled_through), 0);
    SELECT coalesce(max(event.event_id), 0) INTO v_newest FROM receipts.events AS event;
    -- The ids present without a gap after v_from, up to the newest (at most 100,000 looked at:
    -- past that, positions answer resync.required).
    SELECT count(*) INTO v_kept
    FROM (
        SELECT ids.event_id, row_number() OVER (ORDER BY ids.event_id) AS n
        FROM (
            SELECT event.event_id FROM receipts.events AS event
            WHERE event.event_id > v_from AND event.event_id <= v_newest
            ORDER BY event.event_id LIMIT 100000
        ) AS ids
    ) AS numbered
    WHERE numbered.event_id = v_from + numbered.n;

    v_row.ordinal := coalesce(v_previous.ordinal, 0) + 1;
    v_row.history_id := left(replace(gen_random_uuid()::text, '-', ''), 12);
    SELECT control.system_identifier INTO v_row.system_identifier FROM pg_control_system() AS control;
    v_row.timeline := ('x' || receipts.wal_timeline())::bit(32)::bigint;
    v_row.started_after := greatest(coalesce(pg_sequence_last_value('receipts.event_ids'), 0), coalesce(v_previous.started_after, 0));
    v_row.resumable_through := least(v_from + v_kept, v_row.started_after);
    v_row.settled_through := v_row.resumable_through;
    v_row.began_at := now();
    v_row.reason := p_reason;
    INSERT INTO receipts.event_histories VALUES (v_row.*);
    -- Event ids up to started_after that a transaction of this history holds move above it as
    -- it commits (the renumbering of abandoned ids; the horizon only grows).
    IF v_row.started_after > (SELECT horizon.last_value FROM receipts.abandoned_event_ids AS horizon) THEN
        PERFORM setval('receipts.abandoned_event_ids', v_row.started_after);
    END IF;
    RAISE LOG 'receipts: event history % began (%): ids above % are its own, positions up to % resume',
        v_row.history_id, p_reason, v_row.started_after, v_row.resumable_through;
    RETURN v_row;
END;
$$;
COMMENT ON FUNCTION receipts.begin_history_locked(text) IS
    'Begins a new event history (the caller holds the history lock): see sql/functions/histories.sql.';
REVOKE ALL ON FUNCTION receipts.begin_history_locked(text) FROM PUBLIC;

-- For an operator, after restoring the database in a way that keeps its cluster and timeline
-- (a copy of the data directory put back in place): streams and webhooks must not take ids
-- of the lost past for positions in this one. Run it before the service starts again.
CREATE OR REPLACE FUNCTION receipts.begin_event_history(p_reason text DEFAULT 'begun by an operator') RETURNS text
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(8242555388271095924);
    RETURN (receipts.begin_history_locked(p_reason)).history_id;
END;
$$;
COMMENT ON FUNCTION receipts.begin_event_history(text) IS
    'Begins a new event history by hand (after restoring a copy of the data directory in place; docs/operations.md): positions up to what this database kept still resume, later ones answer resync.required.';
REVOKE ALL ON FUNCTION receipts.begin_event_history(text) FROM PUBLIC;

-- The histories that led to the current one, oldest first (after making sure the newest is
-- the current one).
CREATE OR REPLACE FUNCTION receipts.event_history_lineage()
RETURNS TABLE (history_id text, started_after bigint, resumable_through bigint)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.current_event_history();
    RETURN QUERY
    SELECT history.history_id::text, history.started_after, history.resumable_through
    FROM receipts.event_histories AS history ORDER BY history.ordinal;
END;
$$;
COMMENT ON FUNCTION receipts.event_history_lineage() IS
    'Every event history of this database, oldest first; the last is the current one.';
REVOKE ALL ON FUNCTION receipts.event_history_lineage() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.event_history_lineage() TO receipts_service;

-- The hub's record of how far it has settled, in its history only: a hub that read the log
-- before a failover must not write its position into the next history. (The caller turns
-- synchronous_commit off for it: a record lost in a crash only makes the next history look
-- further back.)
CREATE OR REPLACE FUNCTION receipts.settle_event_history(p_history text, p_through bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF receipts.current_event_history() <> p_history THEN
        RETURN false;
    END IF;
    UPDATE receipts.event_histories AS history
    SET settled_through = p_through
    WHERE history.history_id = p_history AND history.settled_through < p_through;
    RETURN true;
END;
$$;
COMMENT ON FUNCTION receipts.settle_event_history(text, bigint) IS
    'Records the event hub''s position in the current history (false, and nothing written, when the database has gone on to another).';
REVOKE ALL ON FUNCTION receipts.settle_event_history(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.settle_event_history(text, bigint) TO receipts_service;
