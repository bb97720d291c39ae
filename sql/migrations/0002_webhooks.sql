-- 0002: webhooks, the event log pushed to a tenant's backend (DESIGN.md, "Webhooks (for
-- other backends)"). The functions that use the table are in sql/functions/webhooks.sql.
--
-- A webhook's row is the only truth about what it has delivered: `delivered_through` moves
-- in the same transaction that records an acknowledged batch, so a restart, a crash or
-- another instance resumes exactly after the last acknowledged event. The lease columns
-- make one instance at a time deliver it: an instance holds the lease while it renews it,
-- and another takes it over once it has expired (receipts.claim_webhooks).

CREATE TABLE receipts.webhooks (
    tenant_id        receipts.identifier NOT NULL REFERENCES receipts.tenants ON DELETE CASCADE,
    webhook_id       receipts.identifier NOT NULL,
    url              text        NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    events           text[] COLLATE "C" NOT NULL CHECK (cardinality(events) >= 1),
    secret           text        NOT NULL CHECK (length(secret) BETWEEN 16 AND 128),
    created_at       timestamptz NOT NULL DEFAULT now(),
    delivered_through bigint    NOT NULL CHECK (delivered_through >= 0),
    committed_before pg_snapshot NOT NULL,
    failures         integer     NOT NULL DEFAULT 0 CHECK (failures >= 0),
    last_error       text,
    last_attempt_at  timestamptz,
    next_attempt_at  timestamptz,
    lease_owner      text,
    lease_expires_at timestamptz,
    PRIMARY KEY (tenant_id, webhook_id)
);
COMMENT ON TABLE receipts.webhooks IS
    'Where a tenant''s events are pushed (POST, signed), and how far each webhook has delivered. See DESIGN.md "Webhooks".';
COMMENT ON COLUMN receipts.webhooks.events IS 'The event types delivered (a subset of the known ones, checked by the service).';
COMMENT ON COLUMN receipts.webhooks.secret IS
    'The HMAC-SHA256 key of the Receipts-Signature header. Kept as given, not hashed: every delivery is signed with it.';
COMMENT ON COLUMN receipts.webhooks.delivered_through IS
    'Every event of the tenant up to this id has been acknowledged by the receiver (or is of a type it does not take): deliveries resume after it. Moved only in the transaction that records an acknowledged batch.';
COMMENT ON COLUMN receipts.webhooks.committed_before IS
    'The snapshot at creation: events whose transaction had finished in it were committed before the webhook existed and are not delivered (a new webhook gets the events committed after its creation).';
COMMENT ON COLUMN receipts.webhooks.failures IS 'Failed attempts at the current batch since the last acknowledged one (the backoff grows with it).';
COMMENT ON COLUMN receipts.webhooks.lease_owner IS
    'The instance delivering this webhook (receiptsd''s instance id), while lease_expires_at is in the future.';

-- Instances look for webhooks whose lease is free or expired, across tenants.
CREATE INDEX webhooks_by_lease ON receipts.webhooks (lease_expires_at NULLS FIRST);
COMMENT ON INDEX receipts.webhooks_by_lease IS 'receipts.claim_webhooks finds free and expired leases.';

GRANT SELECT, INSERT, UPDATE, DELETE ON receipts.webhooks TO receipts_service;

-- Row-level security, as every tenant table has it (see "Row-level security" in
-- 0001_baseline.sql).
ALTER TABLE receipts.webhooks ENABLE ROW LEVEL SECURITY;
ALTER TABLE receipts.webhooks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON receipts.webhooks
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));
CREATE POLICY all_tenants_maintenance ON receipts.webhooks TO receipts_maintenance
    USING ((SELECT receipts.works_across_tenants()))
    WITH CHECK ((SELECT receipts.works_across_tenants()));
COMMENT ON POLICY all_tenants_maintenance ON receipts.webhooks IS
    'Members of receipts_maintenance see every tenant while receipts.all_tenants is on (migrations, SECURITY DEFINER functions, operators); see sql/migrations/0001_baseline.sql.';
