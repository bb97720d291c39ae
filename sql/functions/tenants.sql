-- Tenants, their credentials and their users' settings.

CREATE OR REPLACE FUNCTION receipts.enter_tenant(p_tenant text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM set_config('receipts.tenant_id', p_tenant, true);
END;
$$;
COMMENT ON FUNCTION receipts.enter_tenant(text) IS
    'Scopes the current transaction to one tenant: row-level security shows and accepts only its rows.';

CREATE OR REPLACE FUNCTION receipts.create_tenant(p_tenant text, p_name text, p_api_key_hash bytea, p_token_secret bytea)
RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    v_created_at timestamptz;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    INSERT INTO receipts.tenants (tenant_id, name, api_key_hash, token_secret)
    VALUES (p_tenant, p_name, p_api_key_hash, p_token_secret)
    RETURNING created_at INTO v_created_at;
    RETURN v_created_at;
END;
$$;
COMMENT ON FUNCTION receipts.create_tenant(text, text, bytea, bytea) IS 'Registers a tenant with the hash of its API key.';

CREATE OR REPLACE FUNCTION receipts.replace_api_key(p_tenant text, p_api_key_hash bytea)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    UPDATE receipts.tenants AS tenant SET api_key_hash = p_api_key_hash WHERE tenant.tenant_id = p_tenant;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION receipts.replace_api_key(text, bytea) IS 'Gives a tenant a new API key (hash); the old key stops working.';

-- Looking a key up must search every tenant, before any tenant is known: these two run as
-- their owner, beyond row-level security, and reveal only what the caller proves to know.
CREATE OR REPLACE FUNCTION receipts.tenant_for_api_key(p_api_key_hash bytea)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (
        SELECT tenant.tenant_id FROM receipts.tenants AS tenant WHERE tenant.api_key_hash = p_api_key_hash
    );
END;
$$;
COMMENT ON FUNCTION receipts.tenant_for_api_key(bytea) IS 'The tenant whose API key has this SHA-256, if any.';
REVOKE ALL ON FUNCTION receipts.tenant_for_api_key(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.tenant_for_api_key(bytea) TO receipts_service;

CREATE OR REPLACE FUNCTION receipts.tenant_token_secret(p_tenant text)
RETURNS bytea
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (
        SELECT tenant.token_secret FROM receipts.tenants AS tenant WHERE tenant.tenant_id = p_tenant
    );
END;
$$;
COMMENT ON FUNCTION receipts.tenant_token_secret(text) IS 'The key that signs the tenant''s user tokens, to verify one.';
REVOKE ALL ON FUNCTION receipts.tenant_token_secret(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.tenant_token_secret(text) TO receipts_service;

-- The directory of credentials: every tenant with the hash of its API key, for the service
-- to answer an unknown key or a token naming an unknown tenant without a query of its own
-- (a flood of guessed credentials then costs one query per refresh, not one each).
-- Hashes only: a key cannot be recovered from them.
CREATE OR REPLACE FUNCTION receipts.credential_directory()
RETURNS TABLE (tenant_id text, api_key_hash bytea)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT tenant.tenant_id::text, tenant.api_key_hash FROM receipts.tenants AS tenant;
$$;
COMMENT ON FUNCTION receipts.credential_directory() IS
    'Every tenant id with the SHA-256 of its API key: the service''s in-memory directory of credentials.';
REVOKE ALL ON FUNCTION receipts.credential_directory() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.credential_directory() TO receipts_service;

CREATE OR REPLACE FUNCTION receipts.set_read_receipts(p_tenant text, p_user text, p_enabled boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    INSERT INTO receipts.users AS setting (tenant_id, user_id, read_receipts)
    VALUES (p_tenant, p_user, p_enabled)
    ON CONFLICT (tenant_id, user_id) DO UPDATE SET read_receipts = p_enabled, updated_at = now();
    RETURN p_enabled;
END;
$$;
COMMENT ON FUNCTION receipts.set_read_receipts(text, text, boolean) IS
    'Turns a user''s read receipts on or off; reads made while off stay hidden for good.';
