-- 0028: bulk imports (POST /v1/imports, `receiptsd import`): a chat app's history of chats,
-- messages and read state, loaded as if it had been sent and read through the API.
--
-- An import is two stages. Staging: the NDJSON body is parsed by the service, line by line,
-- and COPY'd into the staging tables below (what could not be parsed goes to import_errors
-- at once), in one transaction with the import's row: once the service answers 202 the
-- whole body is in the database, on every standby too, and any instance can finish it.
-- Loading: the chats of the import, in the order of their first line, are loaded a group at
-- a time (receipts.import_group, sql/functions/imports.sql), each group one transaction that
-- also moves imports.next_unit: after a restart or a failover the next holder of the
-- import's lease goes on from the group it had reached. Staging rows go when the import is
-- done.
--
-- COPY FROM refuses a table with row-level security ("COPY FROM is not supported for tables
-- with row-level security"), and every tenant table has it: the service COPYs a body into a
-- temporary table of its session, and moves it into receipts.import_rows with one INSERT,
-- which the tenant's policy checks as it checks every other write.

CREATE TABLE receipts.imports (
    tenant_id          receipts.identifier NOT NULL REFERENCES receipts.tenants ON DELETE CASCADE,
    import_id          receipts.identifier NOT NULL,
    state              text        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'failed')),
    created_at         timestamptz NOT NULL DEFAULT now(),
    finished_at        timestamptz,
    lines              bigint      NOT NULL CHECK (lines >= 0),
    units              integer     NOT NULL DEFAULT 0,
    next_unit          integer     NOT NULL DEFAULT 1,
    chats_imported     bigint      NOT NULL DEFAULT 0,
    messages_imported  bigint      NOT NULL DEFAULT 0,
    receipts_imported  bigint      NOT NULL DEFAULT 0,
    rejected           bigint      NOT NULL DEFAULT 0,
    failure            text,
    lease_owner        text,
    lease_expires_at   timestamptz,
    PRIMARY KEY (tenant_id, import_id)
);
COMMENT ON TABLE receipts.imports IS
    'Bulk imports (POST /v1/imports): their state, how far loading got (next_unit) and what they imported and rejected. Staged lines are in receipts.import_rows.';
COMMENT ON COLUMN receipts.imports.lines IS 'The lines of the body (empty lines included: line numbers count them).';
COMMENT ON COLUMN receipts.imports.units IS 'How many chats the import names (its units of loading, receipts.import_units).';
COMMENT ON COLUMN receipts.imports.next_unit IS 'The first unit not loaded yet: loading resumes there.';
COMMENT ON COLUMN receipts.imports.rejected IS 'Lines rejected, by the parser or by a rule.';
COMMENT ON COLUMN receipts.imports.failure IS 'Why loading stopped (state failed): an error of ours, never a rule of a line.';
CREATE INDEX imports_by_lease ON receipts.imports (lease_expires_at) WHERE state = 'running';
COMMENT ON INDEX receipts.imports_by_lease IS 'receipts.claim_imports finds running imports whose lease is free or expired.';
GRANT SELECT, INSERT, UPDATE, DELETE ON receipts.imports TO receipts_service;
CALL receipts.protect_tenant_table('receipts.imports');

-- The first errors of an import, by line (receipts.import_group keeps the first 100).
CREATE TABLE receipts.import_errors (
    tenant_id  receipts.identifier NOT NULL,
    import_id  receipts.identifier NOT NULL,
    line       bigint NOT NULL,
    code       text   NOT NULL,
    message    text   NOT NULL,
    FOREIGN KEY (tenant_id, import_id) REFERENCES receipts.imports ON DELETE CASCADE
);
CREATE INDEX import_errors_by_line ON receipts.import_errors (tenant_id, import_id, line);
COMMENT ON TABLE receipts.import_errors IS 'An import''s first 100 rejected lines (by line number): the line, a code and why.';
GRANT SELECT, INSERT, DELETE ON receipts.import_errors TO receipts_service;
CALL receipts.protect_tenant_table('receipts.import_errors');

-- The staged lines, one row each (kind c: a chat, m: a message with its readers and
-- deliverers, p: a read or delivered line's position), so that one COPY takes the whole body
-- in the order it comes. Ids are plain text here (the service checked each): the domain's
-- check would run again for every value staged, and runs when loading writes them where they
-- belong. No foreign key to the import either (a check per row); loading and a tenant's
-- erasure delete the rows.
CREATE TABLE receipts.import_rows (
    tenant_id    text COLLATE "C" NOT NULL,
    import_id    text COLLATE "C" NOT NULL,
    line         bigint NOT NULL,
    kind         "char" NOT NULL,
    chat_id      text COLLATE "C" NOT NULL,
    message_id   text COLLATE "C",
    user_id      text COLLATE "C",
    body         text,
    created_at   timestamptz,
    thread_id    text COLLATE "C",
    chat_kind    text,
    members      text[] COLLATE "C",
    joined_at    timestamptz[],
    mentions     text[] COLLATE "C",
    mentions_all boolean,
    read_by      text[] COLLATE "C",
    read_at      timestamptz[],
    delivered_to text[] COLLATE "C",
    delivered_at timestamptz[],
    read         boolean,
    at           timestamptz
);
CREATE INDEX import_rows_by_chat ON receipts.import_rows (tenant_id, import_id, chat_id);
GRANT SELECT, INSERT, DELETE ON receipts.import_rows TO receipts_service;
CALL receipts.protect_tenant_table('receipts.import_rows');
COMMENT ON TABLE receipts.import_rows IS
    'Staged lines of running imports: c a chat (chat_kind, members beside joined_at, created_at), m a message (user_id its sender, body, created_at, thread_id, mentions, mentions_all, its readers and deliverers beside their times), p a read (read) or delivered line (user_id up to message_id, at). A time null: when the message was sent.';

-- The chats an import names, numbered in the order of their first line: what loading goes
-- through, a group of units at a time.
CREATE TABLE receipts.import_units (
    tenant_id   receipts.identifier NOT NULL,
    import_id   receipts.identifier NOT NULL,
    unit        integer NOT NULL,
    chat_id     receipts.identifier NOT NULL,
    rows        bigint  NOT NULL,
    PRIMARY KEY (tenant_id, import_id, unit),
    FOREIGN KEY (tenant_id, import_id) REFERENCES receipts.imports ON DELETE CASCADE
);
COMMENT ON TABLE receipts.import_units IS 'The chats of a running import in the order of their first line, with how many staged rows each has (what sizes a group).';

GRANT SELECT, INSERT, DELETE ON receipts.import_units TO receipts_service;
CALL receipts.protect_tenant_table('receipts.import_units');

ALTER TABLE receipts.events DROP CONSTRAINT events_type_check;
ALTER TABLE receipts.events ADD CONSTRAINT events_type_check CHECK (type IN (
    'message.created', 'receipt.delivered', 'receipt.read', 'unread.changed',
    'message.deleted', 'chat.deleted', 'user.erased', 'message.edited', 'chat.imported'));
