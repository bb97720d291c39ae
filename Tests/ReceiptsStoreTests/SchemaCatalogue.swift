import Foundation
import Postgres

/// What a database's `receipts` schema holds, as one line per property of each object, keyed
/// by the object (and the property): tables and their options, columns, constraints,
/// indexes, sequences, domains, policies, triggers, views, functions (signature, result,
/// language, volatility, security, settings and grants; their bodies by MD5), grants on
/// the schema and tables, and every comment. The runner's bookkeeping is left out, and the
/// role that owns the schema (the one that ran the migrations) is called `owner` in grants,
/// whatever its name.
struct SchemaCatalogue: Equatable {
    /// Property key → its value, e.g. `function receipts.mark_read(text,text,text,text[],text)`
    /// → `returns … config=plan_cache_mode=force_generic_plan acl=…`.
    var entries: [String: String]

    /// The keys whose values differ between two catalogues, or that only one has.
    func differences(from other: SchemaCatalogue) -> Set<String> {
        Set(self.entries.keys).union(other.entries.keys).filter { self.entries[$0] != other.entries[$0] }
    }

    /// The entries but the function bodies (their files' text), sorted by key, as text:
    /// `key = value`, the lines of a value after its first indented by four spaces.
    var listing: String {
        self.entries.filter { !$0.key.hasPrefix("body ") }.sorted { $0.key < $1.key }.map { key, value in
            "\(key) = " + value.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\n    ") + "\n"
        }.joined()
    }

    /// The entries of a `listing`, each with its continuation lines, as text.
    static func entries(ofListing listing: String) -> [String] {
        var entries: [String] = []
        for line in listing.split(separator: "\n", omittingEmptySubsequences: false) where !line.isEmpty {
            if line.hasPrefix("    "), let last = entries.popLast() {
                entries.append(last + "\n" + line)
            } else {
                entries.append(String(line))
            }
        }
        return entries
    }

    static func read(on connection: PostgresConnection) async throws -> SchemaCatalogue {
        // Names print schema-qualified whatever the login role's search path.
        try await connection.execute("SET search_path = pg_catalog")
        let owner = try await connection.query("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'receipts'")
            .scalar(String.self)
        let rows = try await connection.query(Self.sql, [])
        var entries: [String: String] = [:]
        for row in rows {
            let key = try row.decode(String.self, column: 0)
            precondition(entries[key] == nil, "two catalogue entries for \(key)")
            entries[key] = Self.namingOwner(owner, in: try row.decode(String.self, column: 1))
        }
        return SchemaCatalogue(entries: entries)
    }

    /// `value` with the owner's name in its grants (`{name=arwd/name,…}`) written `owner`.
    static func namingOwner(_ owner: String, in value: String) -> String {
        value.replacingOccurrences(of: "{\(owner)=", with: "{owner=")
            .replacingOccurrences(of: ",\(owner)=", with: ",owner=")
            .replacingOccurrences(of: "/\(owner),", with: "/owner,")
            .replacingOccurrences(of: "/\(owner)}", with: "/owner}")
    }

    static let sql = """
        WITH rels AS (
            SELECT oid, relname, relkind FROM pg_class
            WHERE relnamespace = 'receipts'::regnamespace AND relname NOT IN ('schema_migrations', 'schema_scripts')
              AND relname NOT LIKE 'schema_migrations_%' AND relname NOT LIKE 'schema_scripts_%'
        )
        SELECT 'schema receipts', 'acl=' || coalesce(nspacl::text, '') FROM pg_namespace WHERE nspname = 'receipts'
        UNION ALL
        SELECT 'relation ' || relname,
               format('kind=%s options=%s rls=%s/%s acl=%s', relkind, coalesce(reloptions::text, ''), relrowsecurity,
                      relforcerowsecurity, coalesce(relacl::text, ''))
        FROM pg_class WHERE oid IN (SELECT oid FROM rels)
        UNION ALL
        SELECT format('column %s.%s', c.relname, a.attname),
               format('#%s %s collate=%s notnull=%s default=%s', row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum),
                      format_type(a.atttypid, a.atttypmod),
                      coalesce((SELECT collname FROM pg_collation WHERE oid = a.attcollation AND a.attcollation <> 0), ''),
                      a.attnotnull, coalesce(pg_get_expr(d.adbin, d.adrelid), ''))
        FROM rels AS c
        JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        LEFT JOIN pg_attrdef AS d ON d.adrelid = c.oid AND d.adnum = a.attnum
        WHERE c.relkind IN ('r', 'v', 'p')
        UNION ALL
        SELECT format('constraint %s.%s', coalesce(c.relname, t.typname), con.conname),
               pg_get_constraintdef(con.oid)
        FROM pg_constraint AS con
        LEFT JOIN pg_class AS c ON c.oid = con.conrelid
        LEFT JOIN pg_type AS t ON t.oid = con.contypid
        WHERE con.connamespace = 'receipts'::regnamespace AND (con.conrelid = 0 OR con.conrelid IN (SELECT oid FROM rels))
        UNION ALL
        SELECT 'index ' || i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
        FROM pg_index AS i WHERE i.indrelid IN (SELECT oid FROM rels)
        UNION ALL
        SELECT 'sequence ' || c.relname,
               format('type=%s start=%s min=%s max=%s increment=%s cycle=%s', format_type(s.seqtypid, NULL), s.seqstart,
                      s.seqmin, s.seqmax, s.seqincrement, s.seqcycle)
        FROM pg_sequence AS s JOIN rels AS c ON c.oid = s.seqrelid
        UNION ALL
        SELECT 'type ' || t.typname, format('%s base=%s', t.typtype, coalesce(format_type(t.typbasetype, t.typtypmod), ''))
        FROM pg_type AS t WHERE t.typnamespace = 'receipts'::regnamespace AND t.typtype IN ('d', 'e')
        UNION ALL
        SELECT format('policy %s.%s', c.relname, p.polname),
               format('%s permissive=%s roles=%s using=%s check=%s', p.polcmd, p.polpermissive,
                      (SELECT string_agg(CASE WHEN r = 0 THEN 'public' ELSE r::regrole::text END, ',' ORDER BY 1)
                       FROM unnest(p.polroles) AS r),
                      pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
        FROM pg_policy AS p JOIN rels AS c ON c.oid = p.polrelid
        UNION ALL
        SELECT format('trigger %s.%s', c.relname, t.tgname), pg_get_triggerdef(t.oid)
        FROM pg_trigger AS t JOIN rels AS c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal
        UNION ALL
        SELECT 'function ' || p.oid::regprocedure::text,
               format('returns %s language=%s volatility=%s security_definer=%s strict=%s config=%s acl=%s',
                      pg_get_function_result(p.oid), l.lanname, p.provolatile, p.prosecdef, p.proisstrict,
                      (SELECT coalesce(string_agg(setting, ',' ORDER BY setting), '') FROM unnest(p.proconfig) AS setting),
                      coalesce(p.proacl::text, ''))
        FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang
        WHERE p.pronamespace = 'receipts'::regnamespace
        UNION ALL
        SELECT 'body ' || p.oid::regprocedure::text, md5(p.prosrc)
        FROM pg_proc AS p WHERE p.pronamespace = 'receipts'::regnamespace
        UNION ALL
        SELECT 'view ' || c.relname, pg_get_viewdef(c.oid) FROM rels AS c WHERE c.relkind = 'v'
        UNION ALL
        SELECT format('comment %s %s', o.type, o.identity), d.description
        FROM pg_description AS d, LATERAL pg_identify_object(d.classoid, d.objoid, d.objsubid) AS o
        WHERE (o.schema = 'receipts' OR o.identity LIKE '% on receipts.%' OR (o.type = 'schema' AND o.identity = 'receipts'))
          AND o.identity NOT LIKE 'receipts.schema_migrations%' AND o.identity NOT LIKE 'receipts.schema_scripts%'
        """
}
