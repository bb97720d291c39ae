-- Every webhook with where its delivery stands: position, events still to deliver, the
-- last error and the next attempt, whether a 410 Gone disabled it, and which instance holds
-- its lease (and until when).
-- Usage: psql -f sql/admin/webhooks.sql            (every tenant)
--        psql -v tenant=demo -f sql/admin/webhooks.sql   (one tenant)
-- Row-level security is forced (see sql/migrations/0001_baseline.sql): this reads every tenant
-- as a member of receipts_maintenance (the tables' owner is one) with receipts.all_tenants on.
-- Never shows a secret.
\if :{?tenant}
\else
\set tenant ''
\endif
SET receipts.all_tenants = on;
SELECT webhook.tenant_id, webhook.webhook_id, webhook.url, webhook.events, webhook.created_at,
       webhook.delivered_through AS last_event_id,
       receipts.webhook_pending_events(webhook.tenant_id, webhook.delivered_through, webhook.events) AS pending,
       webhook.failures, webhook.last_error, webhook.last_attempt_at, webhook.next_attempt_at,
       webhook.lease_owner, webhook.lease_expires_at, webhook.disabled_at,
       CASE WHEN webhook.disabled_at IS NOT NULL THEN 'disabled (410 Gone) until a PUT'
            WHEN webhook.lease_expires_at > now() THEN 'delivering' ELSE 'waiting for an instance' END AS lease
FROM receipts.webhooks AS webhook
WHERE :'tenant' = '' OR webhook.tenant_id = :'tenant'
ORDER BY webhook.tenant_id, webhook.webhook_id;
