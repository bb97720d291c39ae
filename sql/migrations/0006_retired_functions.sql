-- 0006: functions that no file of sql/functions makes any more, and earlier forms of some
-- that it does make which CREATE OR REPLACE cannot change, dropped once here, where a database
-- that has them meets them, rather than by a DROP kept at the top of a repeatable script for
-- ever (a migration runs once; a script runs again whenever its file changes).
--
-- A migration runs before the scripts (see MigrationRunner): these drops commit, then the
-- changed scripts replace every caller, in one transaction, within the same run. An instance
-- of the previous release that calls one of these in between (a delivery, a read after a
-- rejoin, a deleted chat) gets an error and its client tries again; run `receiptsd migrate`
-- ahead of the deploy (docs/operations.md) to keep that to the migration's own run.

-- Replaced before any release: the reads of a page go to receipts.receipt_chunks directly;
-- the unread rule is the view receipts.member_unread; reads are mark_read_each of five
-- arrays; key lookups return a tenant's secrets by generation (tenant_token_secrets); a
-- webhook's put and acknowledgement take the event history.
DROP FUNCTION IF EXISTS receipts.receipt_chunks_of(text, text, bigint, bigint);
DROP FUNCTION IF EXISTS receipts.unread_of(receipts.chat_members, bigint);
DROP FUNCTION IF EXISTS receipts.own_messages(text, text, text, bigint, bigint);
DROP FUNCTION IF EXISTS receipts.mark_read_each(text, text[], text[], text[]);
DROP FUNCTION IF EXISTS receipts.tenant_token_secret(text);
DROP FUNCTION IF EXISTS receipts.put_webhook(text, text, text, text[], text, bigint, integer);
DROP FUNCTION IF EXISTS receipts.acknowledge_webhook_batch(text, text, text, bigint, boolean, interval);

-- Each rule once (issue 31): the first message still to read and the first still to receive
-- are one search, receipts.first_unmarked_seq; what a read's watermark passes is counted by
-- receipts.messages_to_read, as the unread view counts.
DROP FUNCTION IF EXISTS receipts.first_unread_seq(text, text, text, bigint, bigint);
DROP FUNCTION IF EXISTS receipts.first_undelivered_seq(text, text, text, bigint, bigint);
DROP FUNCTION IF EXISTS receipts.recipient_seqs(text, text, text, bigint, bigint);

-- receipts.chat_audience returns a table now (so that the statements reading it inline it),
-- which CREATE OR REPLACE cannot make of the array it returned.
DO $$
BEGIN
    IF pg_catalog.pg_get_function_result(pg_catalog.to_regprocedure('receipts.chat_audience(text, text)')) = 'text[]' THEN
        DROP FUNCTION receipts.chat_audience(text, text);
    END IF;
END
$$;

-- Functions whose result changed before 0005 (event histories) or with it: the scripts
-- dropped and created them again on every run, for a database that might still have the
-- earlier form, which CREATE OR REPLACE cannot change. Only a database whose scripts last ran
-- before 0005 was applied (in this run, or one whose scripts then failed) can: there they are
-- dropped once, and the scripts, which run next, create them. Elsewhere they stay, so the
-- instances still running meanwhile never miss them.
DO $$
BEGIN
    IF (SELECT migration.applied_at FROM receipts.schema_migrations AS migration WHERE migration.version = 5)
       > coalesce((SELECT max(script.applied_at) FROM receipts.schema_scripts AS script), '-infinity') THEN
        DROP FUNCTION IF EXISTS receipts.events_since(bigint, integer);
        DROP FUNCTION IF EXISTS receipts.newest_event();
        DROP FUNCTION IF EXISTS receipts.stream_position(text);
        DROP FUNCTION IF EXISTS receipts.retained_events_after(text, bigint, bigint, integer);
        DROP FUNCTION IF EXISTS receipts.credential_directory();
        DROP FUNCTION IF EXISTS receipts.webhooks_of(text, text);
        DROP FUNCTION IF EXISTS receipts.begin_webhook_attempt(text, text, text, interval);
    END IF;
END
$$;

-- The script that held only the first DROP above is gone; so is its record.
DELETE FROM receipts.schema_scripts WHERE path = 'functions/pages.sql';
