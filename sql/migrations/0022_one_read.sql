-- 0022: receipts.mark_read takes a scope (a read up to a message, or of everything, in the
-- main timeline or a thread), as receipts.mark_delivered does: it is now the service's own
-- statement for a call of one read (sql/functions/marking.sql), no longer only one request of
-- receipts.mark_read_each for psql. CREATE OR REPLACE cannot add an argument, so the form of
-- five arguments is dropped here; sql/functions/marking.sql makes the new one in the same run
-- (see 0006 for why such drops are migrations). psql calls of five arguments still work: the
-- scope has a default.
DROP FUNCTION IF EXISTS receipts.mark_read(text, text, text, text[], text);
