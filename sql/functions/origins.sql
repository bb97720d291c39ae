-- The web origins a tenant's credentials may be used from (its allowed origins; the column
-- is in sql/migrations/0004_allowed_origins.sql). The service checks a browser's Origin
-- against them on every request: it holds them in memory with the directory of credentials,
-- so setting them NOTIFYs receipts_credentials like any change of credentials, and every
-- instance reloads within a second.

CREATE OR REPLACE FUNCTION receipts.set_allowed_origins(p_tenant text, p_origins text[])
RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_origins text[];
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    UPDATE receipts.tenants AS tenant SET allowed_origins = p_origins
    WHERE tenant.tenant_id = p_tenant
    RETURNING tenant.allowed_origins INTO v_origins;
    IF FOUND THEN
        PERFORM receipts.credentials_changed(p_tenant);
    END IF;
    RETURN v_origins;
END;
$$;
COMMENT ON FUNCTION receipts.set_allowed_origins(text, text[]) IS
    'Replaces the tenant''s allowed web origins and tells every instance; null for an unknown tenant.';

-- Read before any tenant is known (the directory serves every tenant): as the owner, beyond
-- row-level security. Only tenants with origins: most have none.
CREATE OR REPLACE FUNCTION receipts.tenant_allowed_origins()
RETURNS TABLE (tenant_id text, allowed_origins text[])
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT tenant.tenant_id::text, tenant.allowed_origins
    FROM receipts.tenants AS tenant
    WHERE cardinality(tenant.allowed_origins) > 0 AND tenant.erasing_since IS NULL;
$$;
COMMENT ON FUNCTION receipts.tenant_allowed_origins() IS
    'Every tenant with allowed web origins, and those origins: part of the service''s in-memory directory of credentials.';
REVOKE ALL ON FUNCTION receipts.tenant_allowed_origins() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.tenant_allowed_origins() TO receipts_service;
