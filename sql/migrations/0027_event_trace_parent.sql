-- 0027: each event keeps the W3C traceparent of the batch that wrote it, when the service
-- traces (RECEIPTS_OTEL_ENDPOINT, docs/operations.md "Traces"), so that the event's webhook
-- delivery, on whichever instance, continues that trace. The default reads the
-- transaction's setting receipts.trace_parent, which only a traced batch sets: every writer
-- of the log gets it without a change, and a row written without it is null. current_setting
-- is stable, not volatile, so adding the column rewrites no row (existing ones read null).

ALTER TABLE receipts.events
    ADD COLUMN trace_parent text DEFAULT nullif(current_setting('receipts.trace_parent', true), '');
COMMENT ON COLUMN receipts.events.trace_parent IS
    'The W3C traceparent of the traced batch that wrote the event (the transaction''s receipts.trace_parent), which its webhook delivery continues; null when untraced.';

-- The hub's read of the log returns each event's trace parent too (its relay's span continues
-- it), which CREATE OR REPLACE cannot add: dropped here, made again by
-- sql/functions/events.sql right after. An instance of the previous release names the
-- columns it reads, so the added one changes nothing for it.
DROP FUNCTION IF EXISTS receipts.events_since(bigint, integer);
