-- A tenant's rate limit (the columns are in sql/migrations/0025_tenant_limits.sql). The
-- service checks it on every request: it holds the limits in memory with the directory of
-- credentials, so a change NOTIFYs receipts_credentials, from the API
-- (PUT /admin/v1/tenants/{tenantId}/limits) and from psql alike
-- (sql/triggers/tenant_limits.sql), and every instance applies it within a second:
--     UPDATE receipts.tenants SET requests_per_second = 50, burst = 100 WHERE tenant_id = 'acme';

CREATE OR REPLACE FUNCTION receipts.set_tenant_limits(p_tenant text, p_requests_per_second integer, p_burst integer)
RETURNS TABLE (requests_per_second integer, burst integer)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    UPDATE receipts.tenants AS tenant
    SET requests_per_second = p_requests_per_second, burst = p_burst
    WHERE tenant.tenant_id = p_tenant AND tenant.erasing_since IS NULL
    RETURNING tenant.requests_per_second, tenant.burst;
END;
$$;
COMMENT ON FUNCTION receipts.set_tenant_limits(text, integer, integer) IS
    'Sets the tenant''s rate limit (null: the instance''s default); no row for an unknown tenant or one being erased.';

-- Read before any tenant is known (the directory serves every tenant): as the owner, beyond
-- row-level security. Only tenants with a limit of their own: most have none.
CREATE OR REPLACE FUNCTION receipts.tenant_limits()
RETURNS TABLE (tenant_id text, requests_per_second integer, burst integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT tenant.tenant_id::text, tenant.requests_per_second, tenant.burst
    FROM receipts.tenants AS tenant
    WHERE (tenant.requests_per_second IS NOT NULL OR tenant.burst IS NOT NULL) AND tenant.erasing_since IS NULL;
$$;
COMMENT ON FUNCTION receipts.tenant_limits() IS
    'Every tenant with a rate limit of its own: part of the service''s in-memory directory of credentials.';
REVOKE ALL ON FUNCTION receipts.tenant_limits() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.tenant_limits() TO receipts_service;
