-- 0001: the data model of Receipts (see DESIGN.md, "Data model").
--
-- Every tenant-owned table leads with tenant_id, and every primary key starts with it.
-- Row-level security keys each row on the per-transaction setting receipts.tenant_id;
-- the service runs tenant work as the role receipts_service, which is subject to it.

CREATE SCHEMA IF NOT EXISTS receipts;
COMMENT ON SCHEMA receipts IS 'Receipts: delivery and read receipts for chat apps. See sql/admin/ for operator queries.';

-- Ids of tenants, chats, users and messages: 1-128 characters of [A-Za-z0-9._:@-].
-- Byte order ("C" collation): ids are ASCII, and every index and comparison on them stays
-- a memcmp, whatever the database's default collation.
CREATE DOMAIN receipts.identifier AS text COLLATE "C"
    CHECK (VALUE ~ '^[A-Za-z0-9._:@-]{1,128}$');
COMMENT ON DOMAIN receipts.identifier IS 'An id of a tenant, chat, user or message: 1-128 characters of [A-Za-z0-9._:@-], compared byte by byte.';

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

CREATE TABLE receipts.chats (
    tenant_id  receipts.identifier NOT NULL REFERENCES receipts.tenants ON DELETE CASCADE,
    chat_id    receipts.identifier NOT NULL,
    kind       text        NOT NULL CHECK (kind IN ('direct', 'group')),
    last_seq   bigint      NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, chat_id)
);
COMMENT ON TABLE receipts.chats IS 'Conversations. A direct chat has exactly two members; a group any number.';
COMMENT ON COLUMN receipts.chats.last_seq IS 'seq of the newest message; sending locks this row, so seq is gap-free and ordered per chat.';

CREATE TABLE receipts.chat_members (
    tenant_id     receipts.identifier NOT NULL,
    chat_id       receipts.identifier NOT NULL,
    user_id       receipts.identifier NOT NULL,
    joined_at     timestamptz NOT NULL DEFAULT now(),
    left_at       timestamptz,
    read_seq      bigint      NOT NULL DEFAULT 0 CHECK (read_seq >= 0),
    delivered_seq bigint      NOT NULL DEFAULT 0 CHECK (delivered_seq >= 0),
    marked_unread boolean     NOT NULL DEFAULT false,
    reads_above   bigint      NOT NULL DEFAULT 0 CHECK (reads_above >= 0),
    last_read_at  timestamptz,
    PRIMARY KEY (tenant_id, chat_id, user_id),
    FOREIGN KEY (tenant_id, chat_id) REFERENCES receipts.chats ON DELETE CASCADE
);
COMMENT ON TABLE receipts.chat_members IS 'Everyone who is or was in a chat, with their read watermark. left_at is null while they are a member.';
COMMENT ON COLUMN receipts.chat_members.joined_at IS 'Start of the current (or last) membership.';
COMMENT ON COLUMN receipts.chat_members.read_seq IS 'Read watermark: every message with seq <= read_seq is read by this user; unread counts look only above it.';
COMMENT ON COLUMN receipts.chat_members.delivered_seq IS 'Delivery watermark: every message with seq <= delivered_seq has reached this user.';
COMMENT ON COLUMN receipts.chat_members.last_read_at IS 'When the user last marked something read here.';
COMMENT ON COLUMN receipts.chat_members.reads_above IS 'How many messages above read_seq this user has read (out of order), so an unread count is arithmetic, not a scan.';
COMMENT ON COLUMN receipts.chat_members.marked_unread IS 'The user marked the chat unread: its count is at least 1 until they read.';
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

CREATE TABLE receipts.messages (
    tenant_id      receipts.identifier NOT NULL,
    chat_id        receipts.identifier NOT NULL,
    message_id     receipts.identifier NOT NULL,
    seq            bigint      NOT NULL CHECK (seq > 0),
    sender_id      receipts.identifier NOT NULL,
    body           text        NOT NULL CHECK (octet_length(body) <= 65536),
    created_at     timestamptz NOT NULL DEFAULT now(),
    delivered_to   text[] COLLATE "C"      NOT NULL DEFAULT '{}',
    delivered_at   timestamptz[] NOT NULL DEFAULT '{}',
    read_by        text[] COLLATE "C"      NOT NULL DEFAULT '{}',
    read_at        timestamptz[] NOT NULL DEFAULT '{}',
    hidden_read_by text[] COLLATE "C"      NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, chat_id, message_id),
    UNIQUE (tenant_id, chat_id, seq),
    FOREIGN KEY (tenant_id, chat_id) REFERENCES receipts.chats ON DELETE CASCADE,
    CHECK (cardinality(delivered_to) = cardinality(delivered_at)),
    CHECK (cardinality(read_by) = cardinality(read_at))
);
COMMENT ON TABLE receipts.messages IS 'Messages with their receipts. Receipt arrays only grow, through guarded array_append statements.';
COMMENT ON COLUMN receipts.messages.seq IS 'Position in the chat, 1, 2, 3, ... in sending order.';
COMMENT ON COLUMN receipts.messages.delivered_to IS 'Users the message reached (a read implies delivery).';
COMMENT ON COLUMN receipts.messages.delivered_at IS 'When each user of delivered_to got it (same positions).';
COMMENT ON COLUMN receipts.messages.read_by IS 'Users who read it, visibly.';
COMMENT ON COLUMN receipts.messages.read_at IS 'When each user of read_by read it (same positions).';
COMMENT ON COLUMN receipts.messages.hidden_read_by IS 'Users who read it with read receipts off: it counts as read for them, and is shown to nobody.';
CREATE INDEX messages_by_sender ON receipts.messages (tenant_id, chat_id, sender_id, seq);
COMMENT ON INDEX receipts.messages_by_sender IS 'Counts a user''s own messages above their read watermark (they are never unread for them).';

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
COMMENT ON COLUMN receipts.events.event_id IS 'Position in the stream, from the sequence receipts.event_ids (shared by all tenants). Transactions commit out of order; see 0003_event_log.sql for how readers never skip one.';
COMMENT ON COLUMN receipts.events.transaction_id IS 'The writing transaction, taken before event_id: readers use it with pg_current_snapshot() to tell a gap that may still fill from one that never will.';
COMMENT ON COLUMN receipts.events.user_id IS 'Who acted: the sender of message.created, the reader of receipt.*, the user whose count changed for unread.changed.';
COMMENT ON COLUMN receipts.events.data IS 'Type-specific fields beyond the common ones (e.g. unreadCount).';
COMMENT ON COLUMN receipts.events.audience IS 'Users whose devices may see the event (the chat''s members when it happened, or the user of unread.changed); the tenant key sees all.';
CREATE INDEX events_by_age ON receipts.events (occurred_at);
CREATE INDEX events_in_order ON receipts.events (event_id);
COMMENT ON INDEX receipts.events_in_order IS 'The listener reads every tenant''s new events in id order.';

-- Row-level security: a transaction sees only the rows of the tenant it set with
-- set_config('receipts.tenant_id', <tenant>, true). Without the setting, no rows.
ALTER TABLE receipts.tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE receipts.users ENABLE ROW LEVEL SECURITY;
ALTER TABLE receipts.chats ENABLE ROW LEVEL SECURITY;
ALTER TABLE receipts.chat_members ENABLE ROW LEVEL SECURITY;
ALTER TABLE receipts.membership_periods ENABLE ROW LEVEL SECURITY;
ALTER TABLE receipts.messages ENABLE ROW LEVEL SECURITY;
ALTER TABLE receipts.events ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenant_isolation ON receipts.tenants
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));
CREATE POLICY tenant_isolation ON receipts.users
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));
CREATE POLICY tenant_isolation ON receipts.chats
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));
CREATE POLICY tenant_isolation ON receipts.chat_members
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));
CREATE POLICY tenant_isolation ON receipts.membership_periods
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));
CREATE POLICY tenant_isolation ON receipts.messages
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));
CREATE POLICY tenant_isolation ON receipts.events
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));

-- The role tenant work runs as (SET LOCAL ROLE receipts_service): not the owner of the
-- tables and not a superuser, so row-level security applies to it. Roles belong to the
-- whole cluster, so another database may have created it already.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'receipts_service') THEN
        CREATE ROLE receipts_service NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;
GRANT receipts_service TO CURRENT_USER;
GRANT USAGE ON SCHEMA receipts TO receipts_service;
GRANT SELECT, INSERT, UPDATE, DELETE ON
    receipts.tenants, receipts.users, receipts.chats, receipts.chat_members,
    receipts.membership_periods, receipts.messages, receipts.events
    TO receipts_service;
