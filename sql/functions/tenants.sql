-- Tenants, their credentials and their users' settings.

CREATE OR REPLACE FUNCTION receipts.enter_tenant(p_tenant text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM set_config('receipts.tenant_id', p_tenant, true);
END;
$$;
COMMENT ON FUNCTION receipts.enter_tenant(text) IS
    'Scopes the current transaction to one tenant: row-level security shows and accepts only its rows.';

-- Every change of a tenant's credentials tells every instance (each LISTENs on
-- receipts_credentials, with the tenant's id as payload): they drop what they held of it, so
-- a removed key, a revoked token or a retired secret is refused within a second everywhere.
CREATE OR REPLACE FUNCTION receipts.credentials_changed(p_tenant text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('receipts_credentials', p_tenant);
END;
$$;
COMMENT ON FUNCTION receipts.credentials_changed(text) IS
    'NOTIFY receipts_credentials with the tenant''s id: its keys, token secret or revocations changed (at commit).';

-- A key's id: 'key_' and 16 hexadecimal digits, random.
CREATE OR REPLACE FUNCTION receipts.new_key_id() RETURNS text
LANGUAGE sql VOLATILE AS $$ SELECT 'key_' || substr(md5(random()::text || clock_timestamp()::text), 1, 16) $$;
COMMENT ON FUNCTION receipts.new_key_id() IS 'A new random API key id.';

CREATE OR REPLACE FUNCTION receipts.create_tenant(p_tenant text, p_name text, p_api_key_hash bytea, p_token_secret bytea)
RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    v_created_at timestamptz;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    INSERT INTO receipts.tenants (tenant_id, name, token_secret)
    VALUES (p_tenant, p_name, p_token_secret)
    RETURNING created_at INTO v_created_at;
    INSERT INTO receipts.api_keys (tenant_id, key_id, key_hash, created_at)
    VALUES (p_tenant, receipts.new_key_id(), p_api_key_hash, v_created_at);
    PERFORM receipts.credentials_changed(p_tenant);
    RETURN v_created_at;
END;
$$;
COMMENT ON FUNCTION receipts.create_tenant(text, text, bytea, bytea) IS 'Registers a tenant with the hash of its first API key.';

CREATE OR REPLACE FUNCTION receipts.replace_api_key(p_tenant text, p_api_key_hash bytea)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    PERFORM FROM receipts.tenants AS tenant WHERE tenant.tenant_id = p_tenant AND tenant.erasing_since IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM receipts.api_keys AS key WHERE key.tenant_id = p_tenant;
    INSERT INTO receipts.api_keys (tenant_id, key_id, key_hash) VALUES (p_tenant, receipts.new_key_id(), p_api_key_hash);
    PERFORM receipts.credentials_changed(p_tenant);
    RETURN true;
END;
$$;
COMMENT ON FUNCTION receipts.replace_api_key(text, bytea) IS 'Gives a tenant one new API key (hash) in place of all it had; the old ones stop working.';

-- Adds a key unless the tenant has 10 (the tenant row, locked, orders concurrent additions).
CREATE OR REPLACE FUNCTION receipts.add_api_key(p_tenant text, p_key_id text, p_api_key_hash bytea)
RETURNS TABLE (outcome text, created_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    PERFORM FROM receipts.tenants AS tenant WHERE tenant.tenant_id = p_tenant AND tenant.erasing_since IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'tenant_not_found', NULL::timestamptz;
        RETURN;
    END IF;
    IF (SELECT count(*) FROM receipts.api_keys AS key WHERE key.tenant_id = p_tenant) >= 10 THEN
        RETURN QUERY SELECT 'limit_reached', NULL::timestamptz;
        RETURN;
    END IF;
    PERFORM receipts.credentials_changed(p_tenant);
    RETURN QUERY
    INSERT INTO receipts.api_keys AS key (tenant_id, key_id, key_hash) VALUES (p_tenant, p_key_id, p_api_key_hash)
    RETURNING 'added'::text, key.created_at;
END;
$$;
COMMENT ON FUNCTION receipts.add_api_key(text, text, bytea) IS 'Adds an API key (hash) to a tenant: added | limit_reached (it has 10) | tenant_not_found.';

CREATE OR REPLACE FUNCTION receipts.remove_api_key(p_tenant text, p_key_id text)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    IF NOT EXISTS (SELECT FROM receipts.tenants AS tenant WHERE tenant.tenant_id = p_tenant AND tenant.erasing_since IS NULL) THEN
        RETURN 'tenant_not_found';
    END IF;
    DELETE FROM receipts.api_keys AS key WHERE key.tenant_id = p_tenant AND key.key_id = p_key_id;
    IF NOT FOUND THEN
        RETURN 'key_not_found';
    END IF;
    PERFORM receipts.credentials_changed(p_tenant);
    RETURN 'removed';
END;
$$;
COMMENT ON FUNCTION receipts.remove_api_key(text, text) IS 'Removes one API key (the last one too): removed | key_not_found | tenant_not_found.';

-- The service records which keys requests used, a batch at a time (not one write a request).
CREATE OR REPLACE FUNCTION receipts.record_api_key_use(p_key_hashes bytea[])
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_updated integer;
BEGIN
    UPDATE receipts.api_keys AS key SET last_used_at = now() WHERE key.key_hash = ANY (p_key_hashes);
    GET DIAGNOSTICS v_updated = ROW_COUNT;
    RETURN v_updated;
END;
$$;
COMMENT ON FUNCTION receipts.record_api_key_use(bytea[]) IS 'Sets last_used_at of the keys with these hashes (any tenant: the caller proves it knew each key).';
REVOKE ALL ON FUNCTION receipts.record_api_key_use(bytea[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.record_api_key_use(bytea[]) TO receipts_service;

-- Tokens of the user issued up to now are refused from now on (later ones work). To the
-- millisecond, as tokens carry the time they were issued (iat).
CREATE OR REPLACE FUNCTION receipts.revoke_user_tokens(p_tenant text, p_user text)
RETURNS timestamptz
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := date_trunc('milliseconds', clock_timestamp());
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    INSERT INTO receipts.token_revocations AS revocation (tenant_id, user_id, revoked_before)
    VALUES (p_tenant, p_user, v_now)
    ON CONFLICT (tenant_id, user_id) DO UPDATE SET revoked_before = greatest(revocation.revoked_before, excluded.revoked_before);
    PERFORM receipts.credentials_changed(p_tenant);
    RETURN v_now;
END;
$$;
COMMENT ON FUNCTION receipts.revoke_user_tokens(text, text) IS 'Revokes every token of a user issued up to now; returns that moment.';

-- The current secret becomes the previous one (the one before is retired at once), a new
-- one signs from now on.
CREATE OR REPLACE FUNCTION receipts.rotate_token_secret(p_tenant text, p_new_secret bytea)
RETURNS timestamptz
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_rotated_at timestamptz;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    UPDATE receipts.tenants AS tenant SET
        previous_token_secret = tenant.token_secret,
        token_secret = p_new_secret,
        token_secret_generation = tenant.token_secret_generation + 1,
        token_secret_rotated_at = now()
    WHERE tenant.tenant_id = p_tenant AND tenant.erasing_since IS NULL
    RETURNING tenant.token_secret_rotated_at INTO v_rotated_at;
    IF FOUND THEN
        PERFORM receipts.credentials_changed(p_tenant);
    END IF;
    RETURN v_rotated_at;
END;
$$;
COMMENT ON FUNCTION receipts.rotate_token_secret(text, bytea) IS
    'Signs new tokens with a new secret, keeps verifying with the one it replaces, retires the one before; null for an unknown tenant.';

-- Looking a key up must search every tenant, before any tenant is known: these run as their
-- owner, beyond row-level security, and reveal only what the caller proves to know.
CREATE OR REPLACE FUNCTION receipts.tenant_for_api_key(p_api_key_hash bytea)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (SELECT key.tenant_id FROM receipts.api_keys AS key WHERE key.key_hash = p_api_key_hash);
END;
$$;
COMMENT ON FUNCTION receipts.tenant_for_api_key(bytea) IS 'The tenant whose API key has this SHA-256, if any.';
REVOKE ALL ON FUNCTION receipts.tenant_for_api_key(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.tenant_for_api_key(bytea) TO receipts_service;

CREATE OR REPLACE FUNCTION receipts.tenant_token_secrets(p_tenant text)
RETURNS TABLE (generation integer, current_secret bytea, previous_secret bytea)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT tenant.token_secret_generation, tenant.token_secret, tenant.previous_token_secret
    FROM receipts.tenants AS tenant WHERE tenant.tenant_id = p_tenant AND tenant.erasing_since IS NULL;
$$;
COMMENT ON FUNCTION receipts.tenant_token_secrets(text) IS
    'The keys that verify the tenant''s user tokens: the current generation''s, and the previous one''s while it is not retired.';
REVOKE ALL ON FUNCTION receipts.tenant_token_secrets(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.tenant_token_secrets(text) TO receipts_service;

-- The directory of credentials: every tenant (but those being erased) with the hashes of its
-- API keys (a row with a null hash for a tenant without keys) and its secret's generation, for the service to
-- answer an unknown key or a token naming an unknown tenant without a query of its own (a
-- flood of guessed credentials then costs one query per refresh, not one each). Hashes only:
-- a key cannot be recovered from them.
CREATE OR REPLACE FUNCTION receipts.credential_directory()
RETURNS TABLE (tenant_id text, api_key_hash bytea, secret_generation integer)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT tenant.tenant_id::text, key.key_hash, tenant.token_secret_generation
    FROM receipts.tenants AS tenant
    LEFT JOIN receipts.api_keys AS key ON key.tenant_id = tenant.tenant_id
    WHERE tenant.erasing_since IS NULL;
$$;
COMMENT ON FUNCTION receipts.credential_directory() IS
    'Every tenant id with the SHA-256 of each API key (null: none) and its token secret''s generation: the service''s in-memory directory of credentials.';
REVOKE ALL ON FUNCTION receipts.credential_directory() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.credential_directory() TO receipts_service;

-- Revocations that may still refuse a token: tokens live at most 24 hours, so a revocation
-- older than that has nothing left to refuse.
CREATE OR REPLACE FUNCTION receipts.current_token_revocations()
RETURNS TABLE (tenant_id text, user_id text, revoked_before timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT revocation.tenant_id::text, revocation.user_id::text, revocation.revoked_before
    FROM receipts.token_revocations AS revocation
    WHERE revocation.revoked_before > now() - interval '24 hours';
$$;
COMMENT ON FUNCTION receipts.current_token_revocations() IS
    'Every tenant''s token revocations of the last 24 hours (older ones refuse no unexpired token): part of the service''s directory of credentials.';
REVOKE ALL ON FUNCTION receipts.current_token_revocations() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.current_token_revocations() TO receipts_service;

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
