-- 0017: row-level security that binds the tables' owner too, and the credential directory.
--
-- Until now row-level security was enabled but not forced: the role that owns the tables
-- (the login role that ran the migrations, which the service also logs in as) bypassed it,
-- so any statement that ran as the owner by mistake saw every tenant. From here on:
--
-- THE RULE
--   * Every tenant table has FORCE ROW LEVEL SECURITY. A transaction sees and writes only
--     the rows of the tenant in the setting receipts.tenant_id (receipts.enter_tenant sets
--     it for the transaction), whoever it runs as, the owner included. Superusers and roles
--     with BYPASSRLS are the only exception PostgreSQL itself makes.
--   * Work across tenants runs as a member of the role receipts_maintenance (this migration
--     grants it to the role that runs it, i.e. the tables' owner), in one of two ways, both
--     given by the policy all_tenants_maintenance below, which applies only to members of
--     receipts_maintenance:
--       - with the setting receipts.all_tenants = on: the migration runner (receiptsd
--         migrate / serve) sets it in every migration's transaction; an operator sets it in
--         psql (below);
--       - inside a SECURITY DEFINER function owned by a member, called by the service (whose
--         transactions take the role receipts_service, so the setting `role` reads
--         receipts_service while the function runs as its owner): the API-key and token
--         secret lookups, the event-log reader, stream positions, retention and the
--         credential directory below, each written to work across tenants.
--     receipts_service itself is never a member of receipts_maintenance, so no setting a
--     request could make widens what it sees: it sees one tenant, or, through those
--     functions, only what they return.
--     (Why not `SET receipts.all_tenants = on` on the functions: PostgreSQL lets only a
--     superuser put a custom setting in a function's SET clause, and the owner may not be
--     one.)
--   * An operator in psql, logged in as the owner (or another member of
--     receipts_maintenance), runs one of:
--         SET receipts.all_tenants = on;                 -- every tenant, this session
--         SELECT set_config('receipts.tenant_id', 'TENANT', false);   -- one tenant
--     The queries in sql/admin/ do so themselves. Applying a migration by hand (psql -f)
--     needs the first line too, in the same transaction.
--   * Foreign keys and their cascades are checked beyond row-level security by PostgreSQL,
--     so deleting a tenant still removes its rows everywhere.
--
-- The service's sessions no longer take receipts_service with a session-level SET ROLE,
-- which a statement could undo for every later user of the pooled connection: each
-- transaction takes it with SET LOCAL ROLE (PostgresConfiguration.role), in the same round
-- trip as its first statement.
--
-- Tables created by later migrations must ENABLE and FORCE ROW LEVEL SECURITY and get both
-- policies (tenant_isolation and all_tenants_maintenance), as the loop below gives these.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'receipts_maintenance') THEN
        CREATE ROLE receipts_maintenance NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;
-- (No COMMENT ON ROLE: roles belong to the cluster, and another database's migration may
-- have created it as another user.)
GRANT receipts_maintenance TO CURRENT_USER;

CREATE FUNCTION receipts.works_across_tenants() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT current_setting('receipts.all_tenants', true) = 'on' OR current_setting('role', true) = 'receipts_service';
$$;
COMMENT ON FUNCTION receipts.works_across_tenants() IS
    'For the policy all_tenants_maintenance (members of receipts_maintenance only): receipts.all_tenants is on, or a SECURITY DEFINER function runs for the service. See migration 0017.';

-- Every table of the schema with row-level security: force it, and open it to maintenance.
-- (Table names come from the catalog, quoted with %I: no value is ever put into the SQL.)
DO $$
DECLARE
    v_table regclass;
BEGIN
    FOR v_table IN
        SELECT class.oid::regclass FROM pg_catalog.pg_class AS class
        WHERE class.relnamespace = 'receipts'::regnamespace AND class.relkind IN ('r', 'p') AND class.relrowsecurity
        ORDER BY class.relname
    LOOP
        EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', v_table);
        -- The condition is a sub-select: evaluated once per statement, not once per row.
        EXECUTE format(
            'CREATE POLICY all_tenants_maintenance ON %s TO receipts_maintenance '
            'USING ((SELECT receipts.works_across_tenants())) '
            'WITH CHECK ((SELECT receipts.works_across_tenants()))',
            v_table);
        EXECUTE format(
            'COMMENT ON POLICY all_tenants_maintenance ON %s IS %L',
            v_table,
            'Members of receipts_maintenance see every tenant while receipts.all_tenants is on (migrations, SECURITY DEFINER functions, operators); see migration 0017.');
    END LOOP;
END
$$;

-- The directory of credentials: every tenant with the hash of its API key, for the service
-- to answer an unknown key or a token naming an unknown tenant without a query of its own
-- (a flood of guessed credentials then costs one query per refresh, not one each).
-- Hashes only: a key cannot be recovered from them.
CREATE FUNCTION receipts.credential_directory()
RETURNS TABLE (tenant_id text, api_key_hash bytea)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT tenant.tenant_id::text, tenant.api_key_hash FROM receipts.tenants AS tenant;
$$;
COMMENT ON FUNCTION receipts.credential_directory() IS
    'Every tenant id with the SHA-256 of its API key: the service''s in-memory directory of credentials.';
REVOKE ALL ON FUNCTION receipts.credential_directory() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.credential_directory() TO receipts_service;
