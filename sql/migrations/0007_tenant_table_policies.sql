-- 0007: the row-level security of a tenant table, written once for the migrations to come.
-- 0001_baseline.sql and 0003_deleting_and_credentials.sql each carry a copy of the loop below
-- (they have run on databases, so they stay as they are); a later migration that creates a
-- tenant table calls this instead:
--     CALL receipts.protect_tenant_table('receipts.new_table');
--
-- Defined in a migration, not in sql/functions: migrations run before the scripts, so a
-- migration can only call what an earlier migration made. To change it, CREATE OR REPLACE it
-- in a new migration.
CREATE PROCEDURE receipts.protect_tenant_table(p_table regclass)
LANGUAGE plpgsql AS $$
BEGIN
    -- %s prints a regclass quoted: no value is ever put into the SQL.
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', p_table);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', p_table);
    EXECUTE format(
        'CREATE POLICY tenant_isolation ON %s '
        'USING (tenant_id = current_setting(''receipts.tenant_id'', true)) '
        'WITH CHECK (tenant_id = current_setting(''receipts.tenant_id'', true))',
        p_table);
    -- The condition is a sub-select: evaluated once per statement, not once per row.
    EXECUTE format(
        'CREATE POLICY all_tenants_maintenance ON %s TO receipts_maintenance '
        'USING ((SELECT receipts.works_across_tenants())) '
        'WITH CHECK ((SELECT receipts.works_across_tenants()))',
        p_table);
    EXECUTE format(
        'COMMENT ON POLICY all_tenants_maintenance ON %s IS %L',
        p_table,
        'Members of receipts_maintenance see every tenant while receipts.all_tenants is on (migrations, SECURITY DEFINER functions, operators); see sql/migrations/0001_baseline.sql.');
END;
$$;
COMMENT ON PROCEDURE receipts.protect_tenant_table(regclass) IS
    'For migrations: a new tenant table (leading tenant_id) gets forced row-level security and the policies tenant_isolation and all_tenants_maintenance, as every tenant table has them (sql/migrations/0001_baseline.sql, "Row-level security").';
REVOKE ALL ON PROCEDURE receipts.protect_tenant_table(regclass) FROM PUBLIC;
