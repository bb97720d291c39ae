-- 0025: fairness between tenants (docs/operations.md, "Fairness and rate limits"). A tenant
-- may have a rate limit of its own: requests a second and a burst, per instance. Null is the
-- instance's default (RECEIPTS_TENANT_REQUESTS_PER_SECOND, RECEIPTS_TENANT_BURST). The
-- service checks them on every request, on every instance: it keeps them with the directory
-- of credentials, which every change reloads (sql/functions/limits.sql).

ALTER TABLE receipts.tenants
    ADD COLUMN requests_per_second integer CHECK (requests_per_second BETWEEN 1 AND 1000000),
    ADD COLUMN burst integer CHECK (burst BETWEEN 1 AND 1000000);
COMMENT ON COLUMN receipts.tenants.requests_per_second IS
    'Requests a second the tenant may make on each instance (a token bucket refilled at this rate); null: the instance''s default.';
COMMENT ON COLUMN receipts.tenants.burst IS
    'The most requests the tenant may make at once on each instance after a quiet spell (the bucket''s size); null: the instance''s default, else requests_per_second.';
