-- 0005: event histories (docs/operations.md, "High availability"; how they are kept: see
-- sql/functions/histories.sql).
--
-- A PostgreSQL failover that promotes an asynchronous standby loses the transactions the
-- standby had not received, and the sequence receipts.event_ids goes back with them: the new
-- primary hands out event ids again that clients and webhooks already saw for other events.
-- So a stream position names the history it belongs to. Each row here is one history of
-- this database, in order: the first one (made here), then one each time the database goes
-- on from a past that may differ from the one the service last wrote to (a promoted
-- standby: a new timeline; a cluster restored from a logical dump: a new system identifier;
-- or an operator saying so after a restore that keeps both, receipts.begin_event_history).
-- The rows of the histories that led to this database are the ones it has: a lost history
-- is lost with its rows.
--
-- Event ids above started_after were handed out in that history; at or below it, in an
-- earlier one. Positions of earlier histories up to resumable_through mean the same here
-- (every event up to them is here, and no other); beyond it, a client may have seen events
-- this database never had, so it is told resync.required.

CREATE TABLE receipts.event_histories (
    ordinal            integer     PRIMARY KEY CHECK (ordinal > 0),
    history_id         text COLLATE "C" NOT NULL UNIQUE CHECK (history_id ~ '^[0-9a-f]{12}$'),
    system_identifier  bigint      NOT NULL,
    timeline           bigint      NOT NULL CHECK (timeline > 0),
    started_after      bigint      NOT NULL CHECK (started_after >= 0),
    resumable_through  bigint      NOT NULL CHECK (resumable_through BETWEEN 0 AND started_after),
    settled_through    bigint      NOT NULL CHECK (settled_through >= 0),
    began_at           timestamptz NOT NULL DEFAULT now(),
    reason             text        NOT NULL
);
COMMENT ON TABLE receipts.event_histories IS
    'The histories of this database''s event log, oldest first (a new one after a failover, a restore, ...): a stream position names its history, so an id from a lost one is never taken for a position in this one. See sql/functions/histories.sql.';
COMMENT ON COLUMN receipts.event_histories.ordinal IS 'Its place in the lineage: 1 for the first, then one more for each.';
COMMENT ON COLUMN receipts.event_histories.history_id IS
    'Random; event ids of every history but the first end in ".<history_id>".';
COMMENT ON COLUMN receipts.event_histories.system_identifier IS 'pg_control_system().system_identifier of the cluster it began on.';
COMMENT ON COLUMN receipts.event_histories.timeline IS 'The WAL timeline it began on (a promotion starts a new one).';
COMMENT ON COLUMN receipts.event_histories.started_after IS
    'Event ids above this were handed out in this history; at or below it, in an earlier one.';
COMMENT ON COLUMN receipts.event_histories.resumable_through IS
    'Positions of earlier histories up to here resume in this one; later ones answer resync.required.';
COMMENT ON COLUMN receipts.event_histories.settled_through IS
    'The event hub''s position, recorded about once a second: every event up to it that this history has was visible when it was recorded (where the next history starts checking what it kept).';
COMMENT ON COLUMN receipts.event_histories.began_at IS 'When it began (the first: when this migration ran).';
COMMENT ON COLUMN receipts.event_histories.reason IS 'Why it began: first, new timeline, new cluster, or an operator''s words.';

-- Not a tenant table: no row-level security. The service reads the histories (ids only);
-- only the functions of sql/functions/histories.sql (as the owner) write them.
GRANT SELECT ON receipts.event_histories TO receipts_service;

-- The first history covers every event id there is. (A migration may not call a function of
-- sql/functions: the random id is made here as there.)
INSERT INTO receipts.event_histories
    (ordinal, history_id, system_identifier, timeline, started_after, resumable_through, settled_through, reason)
SELECT 1, left(replace(gen_random_uuid()::text, '-', ''), 12), control.system_identifier,
       ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint, 0, 0, 0, 'first'
FROM pg_control_system() AS control;

-- A webhook's position names its history as a stream's does: delivered_through was written
-- in position_history (receipts.acknowledge_webhook_batch writes it only while the database
-- is still in the history the events were read in).
ALTER TABLE receipts.webhooks ADD COLUMN position_history text COLLATE "C";
UPDATE receipts.webhooks SET position_history = (SELECT history_id FROM receipts.event_histories WHERE ordinal = 1);
ALTER TABLE receipts.webhooks ALTER COLUMN position_history SET NOT NULL;
COMMENT ON COLUMN receipts.webhooks.position_history IS
    'The event history (receipts.event_histories) in which delivered_through was written: after a failover it says whether that position still means the same.';
