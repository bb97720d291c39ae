-- 0001: the schema of Receipts: tables, indexes, sequences, row-level security, roles and
-- grants. Functions, triggers and views are not here: each is defined once, in a file of
-- sql/functions, sql/triggers or sql/views named for what it does, which the migration runner
-- applies again whenever the file changes (see README, "Migrations"). The one exception is
-- receipts.works_across_tenants, below: the policies are built on it.
--
-- This baseline folds the unreleased chain of migrations that grew the schema (kept, for the
-- test that compares the two catalogues, in Tests/Fixtures/legacy-chain). Later changes to
-- tables, indexes or policies are new migrations, numbered from 0002; a migration that landed
-- is never edited.
--
-- Every tenant-owned table leads with tenant_id, and every primary key starts with it.
-- Row-level security keys each row on the per-transaction setting receipts.tenant_id; the
-- service runs tenant work as the role receipts_service, which is subject to it.

CREATE SCHEMA IF NOT EXISTS receipts;
COMMENT ON SCHEMA receipts IS 'Receipts: delivery and read receipts for chat apps. See sql/admin/ for operator queries.';

-- Roles ------------------------------------------------------------------------------------
--
-- receipts_service: the role tenant work runs as (SET LOCAL ROLE receipts_service in every
-- transaction of the service's pool): not the owner of the tables and not a superuser, so
-- row-level security applies to it.
-- receipts_maintenance: its members (the role that runs the migrations) may work across
-- tenants; see "Row-level security" below. receipts_service is never one.
-- Roles belong to the whole cluster, so another database may have created them already.
-- (No COMMENT ON ROLE: another database's migration may have created it as another user.)
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'receipts_service') THEN
        CREATE ROLE receipts_service NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'receipts_maintenance') THEN
        CREATE ROLE receipts_maintenance NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;
GRANT receipts_service TO CURRENT_USER;
GRANT receipts_maintenance TO CURRENT_USER;
GRANT USAGE ON SCHEMA receipts TO receipts_service;

-- Identifiers ------------------------------------------------------------------------------
--
-- Ids of tenants, chats, users and messages: 1-128 characters of [A-Za-z0-9._:@-].
-- Byte order ("C" collation): ids are ASCII, and every index and comparison on them stays
-- a memcmp, whatever the database's default collation.
--
-- Every value stored as an identifier runs the check (a send stores four in its message row
-- and three in each event row), so it avoids a regular expression's bounded repeat: `{1,128}`
-- makes PostgreSQL's engine run an automaton with a state per count, about 8 % of the
-- database's CPU under batched sends; a million 15-character ids take 0.8 s through this
-- check against 10 s through ~ '^[A-Za-z0-9._:@-]{1,128}$'. The rule is the same: every
-- allowed character is ASCII, so a value that passes has as many bytes as characters, and
-- a value with any other character fails the class test whatever its length.
-- IdentifierDomainTests holds this check to that expression on edge cases.
CREATE DOMAIN receipts.identifier AS text COLLATE "C"
    CONSTRAINT identifier_characters CHECK (octet_length(VALUE) BETWEEN 1 AND 128 AND VALUE !~ '[^A-Za-z0-9._:@-]');
COMMENT ON DOMAIN receipts.identifier IS 'An id of a tenant, chat, user or message: 1-128 characters of [A-Za-z0-9._:@-], compared byte by byte.';

-- Tenants and users ------------------------------------------------------------------------

CREATE TABLE receipts.tenants (
    tenant_id    receipts.identifier PRIMARY KEY,
    name         text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    api_key_hash bytea       NOT NULL UNIQUE,
    token_secret bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE receipts.tenants IS 'One row per tenant (a chat app). The API key itself is never stored.';
COMMENT ON COLUMN receipts.tenants.api_key_hash IS 'SHA-256 of the tenant''s API key.';
COMMENT ON COLUMN receipts.tenants.token_secret IS 'HMAC key that signs this tenant''s short-lived user tokens.';

CREATE TABLE receipts.users (
    tenant_id     receipts.identifier NOT NULL REFERENCES receipts.tenants ON DELETE CASCADE,
    user_id       receipts.identifier NOT NULL,
    read_receipts boolean     NOT NULL DEFAULT true,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);
COMMENT ON TABLE receipts.users IS 'Per-user settings. A user without a row has the defaults.';
COMMENT ON COLUMN receipts.users.read_receipts IS 'false: the user''s reads clear their own unread counts but are shown to nobody.';

-- Chats and membership ---------------------------------------------------------------------

CREATE TABLE receipts.chats (
    tenant_id        receipts.identifier NOT NULL REFERENCES receipts.tenants ON DELETE CASCADE,
    chat_id          receipts.identifier NOT NULL,
    kind             text        NOT NULL CHECK (kind IN ('direct', 'group')),
    last_seq         bigint      NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    created_at       timestamptz NOT NULL DEFAULT now(),
    members_numbered integer     NOT NULL DEFAULT 0 CHECK (members_numbered >= 0),
    PRIMARY KEY (tenant_id, chat_id)
);
COMMENT ON TABLE receipts.chats IS 'Conversations. A direct chat has exactly two members; a group any number.';
COMMENT ON COLUMN receipts.chats.last_seq IS 'seq of the newest message; sending locks this row, so seq is gap-free and ordered per chat.';
COMMENT ON COLUMN receipts.chats.members_numbered IS
    'How many users have ever joined: the next member''s number (its receipt chunk: receipts.receipt_chunk_of).';

-- A member row is rewritten by every marking of its user in its chat: pages keep 30 % free,
-- so the new version usually fits on the same page (a HOT update, no new index entries).
CREATE TABLE receipts.chat_members (
    tenant_id        receipts.identifier NOT NULL,
    chat_id          receipts.identifier NOT NULL,
    user_id          receipts.identifier NOT NULL,
    joined_at        timestamptz NOT NULL DEFAULT now(),
    left_at          timestamptz,
    read_seq         bigint      NOT NULL DEFAULT 0 CHECK (read_seq >= 0),
    delivered_seq    bigint      NOT NULL DEFAULT 0 CHECK (delivered_seq >= 0),
    marked_unread    boolean     NOT NULL DEFAULT false,
    reads_above      bigint      NOT NULL DEFAULT 0 CHECK (reads_above >= 0),
    last_read_at     timestamptz,
    period_after_seq bigint      NOT NULL DEFAULT 0,
    receipt_chunk    integer     NOT NULL DEFAULT 0 CHECK (receipt_chunk >= 0),
    PRIMARY KEY (tenant_id, chat_id, user_id),
    FOREIGN KEY (tenant_id, chat_id) REFERENCES receipts.chats ON DELETE CASCADE
) WITH (fillfactor = 70);
COMMENT ON TABLE receipts.chat_members IS 'Everyone who is or was in a chat, with their read watermark. left_at is null while they are a member.';
COMMENT ON COLUMN receipts.chat_members.joined_at IS 'Start of the current (or last) membership.';
COMMENT ON COLUMN receipts.chat_members.read_seq IS 'Read watermark: every message with seq <= read_seq is read by this user; unread counts look only above it.';
COMMENT ON COLUMN receipts.chat_members.delivered_seq IS 'Delivery watermark: every message with seq <= delivered_seq has reached this user.';
COMMENT ON COLUMN receipts.chat_members.last_read_at IS 'When the user last marked something read here.';
COMMENT ON COLUMN receipts.chat_members.reads_above IS 'How many messages above read_seq this user has read (out of order), so an unread count is arithmetic, not a scan.';
COMMENT ON COLUMN receipts.chat_members.marked_unread IS 'The user marked the chat unread: its count is at least 1 until they read.';
COMMENT ON COLUMN receipts.chat_members.period_after_seq IS
    'after_seq of the member''s newest membership period: while read_seq >= it, unread counts need no look at the periods.';
COMMENT ON COLUMN receipts.chat_members.receipt_chunk IS
    'Which row of receipts.receipt_chunks holds this member''s receipts of each message; fixed at their first join.';
CREATE INDEX chat_members_current_by_user ON receipts.chat_members (tenant_id, user_id) WHERE left_at IS NULL;

CREATE TABLE receipts.membership_periods (
    tenant_id receipts.identifier NOT NULL,
    chat_id   receipts.identifier NOT NULL,
    user_id   receipts.identifier NOT NULL,
    after_seq bigint      NOT NULL CHECK (after_seq >= 0),
    until_seq bigint      CHECK (until_seq >= after_seq),
    joined_at timestamptz NOT NULL DEFAULT now(),
    left_at   timestamptz,
    PRIMARY KEY (tenant_id, chat_id, user_id, after_seq),
    FOREIGN KEY (tenant_id, chat_id, user_id) REFERENCES receipts.chat_members ON DELETE CASCADE
);
COMMENT ON TABLE receipts.membership_periods IS 'Each stretch of membership: the user is a recipient of the messages with after_seq < seq <= until_seq (until_seq null: still a member).';

-- Messages and their receipts --------------------------------------------------------------

-- A message row is not written again after its insert (receipts live in receipt_chunks), so
-- its pages are filled completely.
CREATE TABLE receipts.messages (
    tenant_id      receipts.identifier NOT NULL,
    chat_id        receipts.identifier NOT NULL,
    message_id     receipts.identifier NOT NULL,
    seq            bigint      NOT NULL CHECK (seq > 0),
    sender_id      receipts.identifier NOT NULL,
    body           text        NOT NULL CHECK (octet_length(body) <= 65536),
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, chat_id, message_id),
    UNIQUE (tenant_id, chat_id, seq),
    FOREIGN KEY (tenant_id, chat_id) REFERENCES receipts.chats ON DELETE CASCADE
) WITH (fillfactor = 100);
COMMENT ON TABLE receipts.messages IS 'Messages; their receipts are in receipts.receipt_chunks. A row is not written again after its insert.';
COMMENT ON COLUMN receipts.messages.seq IS 'Position in the chat, 1, 2, 3, ... in sending order.';
CREATE INDEX messages_by_sender ON receipts.messages (tenant_id, chat_id, sender_id, seq);
COMMENT ON INDEX receipts.messages_by_sender IS 'Counts a user''s own messages above their read watermark (they are never unread for them).';

-- Receipts in fixed-size chunks of members, so that a read rewrites a small, bounded row
-- whatever the size of the group.
--
-- A chat numbers its members as they first join (chats.members_numbered counts them,
-- chat_members.receipt_chunk = number / 32, kept across leave and rejoin). Each message has
-- one row per chunk, keyed (tenant, chat, seq, chunk), whose arrays hold only that chunk's
-- members: at most 32 readers, so a full row (about 1.7 KB with 10-character ids) stays
-- under the TOAST threshold of about 2 KB (longer ids get compressed), and a receipt
-- rewrites one such row, whatever the group. (With the arrays on the message row, a group
-- of a few hundred members TOASTs them, and every receipt writes a new copy of all of them:
-- a message read by all N members costs O(N^2) bytes.) The rows are created, empty, with
-- their message (trigger create_receipt_chunks), for every chunk up to the chat's last
-- numbered member: the recipients of a message are members when it was sent, so no receipt
-- ever needs a chunk row created later. Receipts are appended with guarded UPDATEs:
--     UPDATE receipt_chunks SET read_by = array_append(read_by, $user), ...
--     WHERE (tenant, chat, seq, chunk) = (..., the reader's chunk) AND NOT ($user = ANY (read_by))
-- A repeat is a no-op; two readers of one chunk row serialise on it and the second re-checks
-- the guard on the first one's version (EvalPlanQual), so neither is lost; readers of
-- different chunks do not wait for each other.
--
-- Alternatives weighed: upserts creating a chunk row at its first receipt (an upsert that
-- both inserts and updates fires the INSERT and UPDATE statement triggers separately, so a
-- read-all would make two receipt.read events for one request, against the contract); counts
-- from the members' watermarks (a read must still record who read when, hidden reads and
-- reads out of order); one row per (message, reader) (smallest writes, but it gives up the
-- array model of guarded appends). Chunks of 16 and 32 measured alike for reads; 32 halves
-- the rows a page and a send of a large group touch; 64 would pass the TOAST threshold with
-- long ids. A chunk row is rewritten by each receipt: pages keep 30 % free for HOT updates.
CREATE TABLE receipts.receipt_chunks (
    tenant_id      receipts.identifier NOT NULL,
    chat_id        receipts.identifier NOT NULL,
    seq            bigint      NOT NULL,
    chunk          integer     NOT NULL CHECK (chunk >= 0),
    message_id     receipts.identifier NOT NULL,
    delivered_to   text[] COLLATE "C"      NOT NULL DEFAULT '{}',
    delivered_at   timestamptz[] NOT NULL DEFAULT '{}',
    read_by        text[] COLLATE "C"      NOT NULL DEFAULT '{}',
    read_at        timestamptz[] NOT NULL DEFAULT '{}',
    hidden_read_by text[] COLLATE "C"      NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, chat_id, seq, chunk),
    FOREIGN KEY (tenant_id, chat_id, seq) REFERENCES receipts.messages (tenant_id, chat_id, seq) ON DELETE CASCADE,
    CHECK (cardinality(delivered_to) = cardinality(delivered_at)),
    CHECK (cardinality(read_by) = cardinality(read_at))
) WITH (fillfactor = 70);
COMMENT ON TABLE receipts.receipt_chunks IS
    'A message''s receipts, one row per chunk of 32 chat members (chat_members.receipt_chunk), created empty with the message; the arrays only grow, through guarded array_append statements.';
COMMENT ON COLUMN receipts.receipt_chunks.message_id IS 'The message''s id, for the events (the key is its seq).';
COMMENT ON COLUMN receipts.receipt_chunks.delivered_to IS 'Members of this chunk the message reached (a read implies delivery).';
COMMENT ON COLUMN receipts.receipt_chunks.delivered_at IS 'When each user of delivered_to got it (same positions).';
COMMENT ON COLUMN receipts.receipt_chunks.read_by IS 'Members of this chunk who read it, visibly.';
COMMENT ON COLUMN receipts.receipt_chunks.read_at IS 'When each user of read_by read it (same positions).';
COMMENT ON COLUMN receipts.receipt_chunks.hidden_read_by IS 'Members of this chunk who read it with read receipts off: read for them, shown to nobody.';

-- The event log ----------------------------------------------------------------------------
--
-- How readers never skip an event although transactions commit out of order, and how the
-- event hub's wait at a missing id is bounded: see sql/functions/events.sql.

CREATE SEQUENCE receipts.event_ids AS bigint;
COMMENT ON SEQUENCE receipts.event_ids IS 'Event ids, shared by all tenants; stream positions are these ids.';
GRANT USAGE ON SEQUENCE receipts.event_ids TO receipts_service;

-- A sequence, not a table row: setval is seen at once by every transaction, whatever its
-- snapshot (a REPEATABLE READ writer would not see a newer row of a table), and reading it
-- writes nothing.
CREATE SEQUENCE receipts.abandoned_event_ids AS bigint MINVALUE 0 START 0;
COMMENT ON SEQUENCE receipts.abandoned_event_ids IS
    'Abandon horizon: event ids up to last_value that were still missing when the hub raised it will never be visible; a late transaction holding such ids renumbers its events above it at commit (sql/functions/events.sql).';
GRANT SELECT ON SEQUENCE receipts.abandoned_event_ids TO PUBLIC;

CREATE TABLE receipts.events (
    tenant_id   receipts.identifier NOT NULL,
    event_id    bigint      NOT NULL CHECK (event_id > 0),
    transaction_id xid8     NOT NULL,
    type        text        NOT NULL
        CHECK (type IN ('message.created', 'receipt.delivered', 'receipt.read', 'unread.changed')),
    chat_id     receipts.identifier NOT NULL,
    user_id     receipts.identifier NOT NULL,
    message_ids text[] COLLATE "C"      NOT NULL DEFAULT '{}',
    data        jsonb       NOT NULL DEFAULT '{}',
    audience    text[] COLLATE "C"      NOT NULL,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, event_id)
);
COMMENT ON TABLE receipts.events IS 'Append-only log of receipt changes, written by triggers and relayed live to devices; pruned after the retention period.';
COMMENT ON COLUMN receipts.events.event_id IS 'Position in the stream, from the sequence receipts.event_ids (shared by all tenants). Transactions commit out of order; see sql/functions/events.sql for how readers never skip one.';
COMMENT ON COLUMN receipts.events.transaction_id IS 'The writing transaction, taken before event_id: readers use it with pg_current_snapshot() to tell a gap that may still fill from one that never will.';
COMMENT ON COLUMN receipts.events.user_id IS 'Who acted: the sender of message.created, the reader of receipt.*, the user whose count changed for unread.changed.';
COMMENT ON COLUMN receipts.events.data IS 'Type-specific fields beyond the common ones (e.g. unreadCount).';
COMMENT ON COLUMN receipts.events.audience IS 'Users whose devices may see the event (the chat''s members when it happened, or the user of unread.changed); the tenant key sees all.';
-- Retention deletes by age, and events arrive in about that order: a BRIN index (a few
-- pages, no per-row entry) serves it instead of a B-tree every event insert would update.
CREATE INDEX events_by_age ON receipts.events USING brin (occurred_at);
COMMENT ON INDEX receipts.events_by_age IS 'Retention finds old events by occurred_at (BRIN: events are appended in about that order).';
CREATE INDEX events_in_order ON receipts.events (event_id);
COMMENT ON INDEX receipts.events_in_order IS 'The listener reads every tenant''s new events in id order.';

CREATE TABLE receipts.event_retention (
    tenant_id      receipts.identifier PRIMARY KEY REFERENCES receipts.tenants ON DELETE CASCADE,
    pruned_through bigint NOT NULL CHECK (pruned_through >= 0)
);
COMMENT ON TABLE receipts.event_retention IS
    'Per tenant, the newest event id that retention deleted: a stream can resume only from a later position.';

-- Grants to the service ---------------------------------------------------------------------

GRANT SELECT, INSERT, UPDATE, DELETE ON
    receipts.tenants, receipts.users, receipts.chats, receipts.chat_members,
    receipts.membership_periods, receipts.messages, receipts.events, receipts.receipt_chunks
    TO receipts_service;
GRANT SELECT ON receipts.event_retention TO receipts_service;

-- Row-level security -----------------------------------------------------------------------
--
-- THE RULE
--   * Every tenant table has FORCE ROW LEVEL SECURITY. A transaction sees and writes only
--     the rows of the tenant in the setting receipts.tenant_id (receipts.enter_tenant sets
--     it for the transaction), whoever it runs as, the owner included. Superusers and roles
--     with BYPASSRLS are the only exception PostgreSQL itself makes. Without the setting, no
--     rows.
--   * Work across tenants runs as a member of receipts_maintenance (granted above to the
--     role that runs the migrations, i.e. the tables' owner), in one of two ways, both given
--     by the policy all_tenants_maintenance, which applies only to members of
--     receipts_maintenance:
--       - with the setting receipts.all_tenants = on: the migration runner (receiptsd
--         migrate / serve) sets it in every migration's transaction; an operator sets it in
--         psql (below);
--       - inside a SECURITY DEFINER function owned by a member, called by the service (whose
--         transactions take the role receipts_service, so the setting `role` reads
--         receipts_service while the function runs as its owner): the API-key and token
--         secret lookups, the event-log reader, stream positions, retention and the
--         credential directory, each written to work across tenants.
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
-- Tables created by later migrations must ENABLE and FORCE ROW LEVEL SECURITY and get both
-- policies (tenant_isolation and all_tenants_maintenance), as the loop below gives these.

-- Defined here, not in sql/functions, because the policies are built on it: to change it,
-- CREATE OR REPLACE it in a new migration.
CREATE FUNCTION receipts.works_across_tenants() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT current_setting('receipts.all_tenants', true) = 'on' OR current_setting('role', true) = 'receipts_service';
$$;
COMMENT ON FUNCTION receipts.works_across_tenants() IS
    'For the policy all_tenants_maintenance (members of receipts_maintenance only): receipts.all_tenants is on, or a SECURITY DEFINER function runs for the service. See sql/migrations/0001_baseline.sql.';

-- Every tenant table (not the runner's bookkeeping). (%s prints a regclass quoted: no value
-- is ever put into the SQL.)
DO $$
DECLARE
    v_table regclass;
BEGIN
    FOREACH v_table IN ARRAY ARRAY[
        'receipts.chat_members', 'receipts.chats', 'receipts.event_retention', 'receipts.events',
        'receipts.membership_periods', 'receipts.messages', 'receipts.receipt_chunks', 'receipts.tenants',
        'receipts.users']::regclass[]
    LOOP
        EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', v_table);
        EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', v_table);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %s '
            'USING (tenant_id = current_setting(''receipts.tenant_id'', true)) '
            'WITH CHECK (tenant_id = current_setting(''receipts.tenant_id'', true))',
            v_table);
        -- The condition is a sub-select: evaluated once per statement, not once per row.
        EXECUTE format(
            'CREATE POLICY all_tenants_maintenance ON %s TO receipts_maintenance '
            'USING ((SELECT receipts.works_across_tenants())) '
            'WITH CHECK ((SELECT receipts.works_across_tenants()))',
            v_table);
        EXECUTE format(
            'COMMENT ON POLICY all_tenants_maintenance ON %s IS %L',
            v_table,
            'Members of receipts_maintenance see every tenant while receipts.all_tenants is on (migrations, SECURITY DEFINER functions, operators); see sql/migrations/0001_baseline.sql.');
    END LOOP;
END
$$;
