-- A webhook's newest attempts (the last 100 are kept a webhook, within the event retention):
-- the batch (its webhook-id, first and last event ids, how many events), when, the receiver's
-- status (empty: no answer came), how long it took, and why it failed.
-- Usage: psql -v tenant=demo -v webhook=backend -f sql/admin/webhook_attempts.sql
--        psql -v tenant=demo -f sql/admin/webhook_attempts.sql   (every webhook of the tenant)
-- Row-level security is forced (see sql/migrations/0001_baseline.sql): this reads as a member
-- of receipts_maintenance (the tables' owner is one) with receipts.all_tenants on.
\if :{?webhook}
\else
\set webhook ''
\endif
SET receipts.all_tenants = on;
SELECT attempt.webhook_id, attempt.attempted_at, attempt.status, attempt.duration_ms, attempt.events,
       attempt.first_event_id, attempt.last_event_id, attempt.webhook_message_id, attempt.error
FROM receipts.webhook_attempts AS attempt
WHERE attempt.tenant_id = :'tenant' AND (:'webhook' = '' OR attempt.webhook_id = :'webhook')
ORDER BY attempt.webhook_id, attempt.attempt_id DESC;
