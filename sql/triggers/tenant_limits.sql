-- A change of a tenant's rate limit, from the API or psql, tells every instance, which
-- reloads its directory of credentials (sql/functions/limits.sql).
CREATE OR REPLACE FUNCTION receipts.tenant_limits_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.credentials_changed(NEW.tenant_id);
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION receipts.tenant_limits_changed() IS
    'Tells every instance that a tenant''s rate limit changed (they reload their directory of credentials).';

DROP TRIGGER IF EXISTS tenant_limits_changed ON receipts.tenants;
CREATE TRIGGER tenant_limits_changed
    AFTER UPDATE OF requests_per_second, burst ON receipts.tenants
    FOR EACH ROW
    WHEN (OLD.requests_per_second IS DISTINCT FROM NEW.requests_per_second OR OLD.burst IS DISTINCT FROM NEW.burst)
    EXECUTE FUNCTION receipts.tenant_limits_changed();
