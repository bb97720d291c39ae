-- 0003: deleting messages and chats, erasing users and tenants, and credentials that change
-- (DESIGN.md, "Deleting, erasing and credentials").
--
-- Deleting.
-- A deleted message's row goes at once (with its receipt chunks), so every reader (listings,
-- labels, marking, counts) simply no longer finds it; its id stays taken in
-- receipts.deleted_messages. A deleted chat's row goes at once with its members (so every
-- count and list drops it), but its messages may be many: they stay, unreachable (every path
-- to a message goes through its chat row or a member row), until the background purge
-- (receipts.purge_deleted_chat_batch) removes them in bounded batches. So messages no longer
-- cascade from their chat.

-- The event log carries the new types; chat.deleted names no user and user.erased no chat.
ALTER TABLE receipts.events DROP CONSTRAINT events_type_check;
ALTER TABLE receipts.events ADD CONSTRAINT events_type_check CHECK (type IN (
    'message.created', 'receipt.delivered', 'receipt.read', 'unread.changed',
    'message.deleted', 'chat.deleted', 'user.erased'));
ALTER TABLE receipts.events ALTER COLUMN chat_id DROP NOT NULL;
ALTER TABLE receipts.events ALTER COLUMN user_id DROP NOT NULL;
COMMENT ON COLUMN receipts.events.chat_id IS 'The chat it happened in; null for user.erased.';
COMMENT ON COLUMN receipts.events.user_id IS
    'Who acted: the sender of message.created and message.deleted, the reader of receipt.*, the user whose count changed for unread.changed, the erased user of user.erased; null for chat.deleted.';

CREATE TABLE receipts.deleted_messages (
    tenant_id  receipts.identifier NOT NULL,
    chat_id    receipts.identifier NOT NULL,
    message_id receipts.identifier NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, chat_id, message_id),
    FOREIGN KEY (tenant_id, chat_id) REFERENCES receipts.chats ON DELETE CASCADE
);
COMMENT ON TABLE receipts.deleted_messages IS
    'Ids of deleted messages: a delete again answers as done, a send with the id is a conflict. Gone with the chat.';

ALTER TABLE receipts.messages DROP CONSTRAINT messages_tenant_id_chat_id_fkey;

CREATE TABLE receipts.chat_purges (
    tenant_id    receipts.identifier NOT NULL REFERENCES receipts.tenants ON DELETE CASCADE,
    chat_id      receipts.identifier NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, chat_id)
);
COMMENT ON TABLE receipts.chat_purges IS
    'Deleted chats whose messages are still to be removed (in batches, in the background; a PUT of the same id removes the rest at once).';

-- Credentials. A tenant has 1-10 API keys (none once the last is removed: locked out until
-- one is added), each stored as its SHA-256 only, with an id to name it by. The token secret
-- has generations: tokens name theirs (the JWT's kid), and the previous generation keeps
-- verifying the tokens it signed until the next rotation (they expire within 24 hours of
-- it anyway). A user's tokens issued up to a moment are revoked by that moment, kept while a
-- token issued before it may still be unexpired. Every change NOTIFYs receipts_credentials
-- with the tenant's id, so every instance drops what it held (sql/functions/tenants.sql).
CREATE TABLE receipts.api_keys (
    tenant_id    receipts.identifier NOT NULL REFERENCES receipts.tenants ON DELETE CASCADE,
    key_id       receipts.identifier NOT NULL,
    key_hash     bytea       NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    PRIMARY KEY (tenant_id, key_id)
);
COMMENT ON TABLE receipts.api_keys IS 'A tenant''s API keys (1-10; none: locked out). The key itself is never stored.';
COMMENT ON COLUMN receipts.api_keys.key_id IS 'Names the key in the admin API (listing, removing); reveals nothing of it.';
COMMENT ON COLUMN receipts.api_keys.key_hash IS 'SHA-256 of the API key.';
COMMENT ON COLUMN receipts.api_keys.last_used_at IS 'When a request last used it, as the service records it (within about a minute).';
INSERT INTO receipts.api_keys (tenant_id, key_id, key_hash, created_at)
SELECT tenant.tenant_id, 'key_' || substr(md5(tenant.tenant_id || random()::text), 1, 16), tenant.api_key_hash, tenant.created_at
FROM receipts.tenants AS tenant;
ALTER TABLE receipts.tenants DROP COLUMN api_key_hash;
COMMENT ON TABLE receipts.tenants IS 'One row per tenant (a chat app). Its API keys are in receipts.api_keys.';

ALTER TABLE receipts.tenants ADD COLUMN token_secret_generation integer NOT NULL DEFAULT 0;
ALTER TABLE receipts.tenants ADD COLUMN previous_token_secret bytea;
ALTER TABLE receipts.tenants ADD COLUMN token_secret_rotated_at timestamptz;
COMMENT ON COLUMN receipts.tenants.token_secret IS 'HMAC key that signs this tenant''s new user tokens (generation token_secret_generation).';
COMMENT ON COLUMN receipts.tenants.token_secret_generation IS 'Generation of token_secret, named by the tokens it signs (kid g<n>); 0 before any rotation.';
COMMENT ON COLUMN receipts.tenants.previous_token_secret IS
    'The secret of the generation before, still verifying the tokens it signed (they expire within 24 h of the rotation); null once retired.';
COMMENT ON COLUMN receipts.tenants.token_secret_rotated_at IS 'When the secret was last rotated.';

CREATE TABLE receipts.token_revocations (
    tenant_id      receipts.identifier NOT NULL REFERENCES receipts.tenants ON DELETE CASCADE,
    user_id        receipts.identifier NOT NULL,
    revoked_before timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, user_id)
);
COMMENT ON TABLE receipts.token_revocations IS 'A user''s tokens issued up to revoked_before are refused.';
COMMENT ON COLUMN receipts.token_revocations.revoked_before IS 'Tokens issued at or before this are refused; later ones work.';

-- Erasing. A request does at once what must hold at once (the user leaves every chat and
-- forgets their memberships, their tokens are revoked; a tenant's keys go) and records the
-- rest as work in these tables, which the service's erasure worker does in bounded batches,
-- one transaction each, so it survives restarts (sql/functions/erasing.sql).
CREATE TABLE receipts.erasures (
    tenant_id        receipts.identifier NOT NULL REFERENCES receipts.tenants ON DELETE CASCADE,
    user_id          receipts.identifier NOT NULL,
    requested_at     timestamptz NOT NULL DEFAULT now(),
    deletes_messages boolean     NOT NULL DEFAULT false,
    through_event_id bigint      NOT NULL DEFAULT 0,
    events_after     bigint      NOT NULL DEFAULT 0,
    done_at          timestamptz,
    PRIMARY KEY (tenant_id, user_id)
);
COMMENT ON TABLE receipts.erasures IS 'Erasures of users, asked for and under way or done (the latest per user).';
COMMENT ON COLUMN receipts.erasures.deletes_messages IS 'The messages the user sent are deleted too (?messages=delete).';
COMMENT ON COLUMN receipts.erasures.through_event_id IS 'Events up to this id naming the user are removed; later ones are the new user''s.';
COMMENT ON COLUMN receipts.erasures.events_after IS 'How far the removal of the user''s events has got (event id).';
COMMENT ON COLUMN receipts.erasures.done_at IS 'When the erasure finished (user.erased was sent); null while pending.';

CREATE TABLE receipts.erasure_chats (
    tenant_id        receipts.identifier NOT NULL,
    user_id          receipts.identifier NOT NULL,
    chat_id          receipts.identifier NOT NULL,
    receipt_chunk    integer     NOT NULL,
    through_seq      bigint      NOT NULL,
    done_through_seq bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, user_id, chat_id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES receipts.erasures ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, chat_id) REFERENCES receipts.chats ON DELETE CASCADE
);
COMMENT ON TABLE receipts.erasure_chats IS
    'Chats of a pending erasure whose receipts of the user are still to be removed (gone with the chat: its messages go anyway).';
COMMENT ON COLUMN receipts.erasure_chats.receipt_chunk IS 'The chunk that held the user''s receipts in this chat.';
COMMENT ON COLUMN receipts.erasure_chats.through_seq IS
    'The chat''s last message when erasure was asked: the user''s receipts on messages up to it are removed; the same id back in the chat is a recipient of later ones only.';
COMMENT ON COLUMN receipts.erasure_chats.done_through_seq IS 'Messages up to this seq are done.';

CREATE TABLE receipts.tenant_erasures (
    tenant_id    receipts.identifier PRIMARY KEY,
    requested_at timestamptz NOT NULL DEFAULT now(),
    done_at      timestamptz
);
COMMENT ON TABLE receipts.tenant_erasures IS 'Erasures of whole tenants; the row stays once the tenant is gone, saying it is done.';
COMMENT ON COLUMN receipts.tenant_erasures.done_at IS 'When the last of the tenant''s rows went; null while pending.';

ALTER TABLE receipts.tenants ADD COLUMN erasing_since timestamptz;
COMMENT ON COLUMN receipts.tenants.erasing_since IS 'Set when the tenant''s erasure was asked: its credentials stop at once, its rows go in the background.';

-- Not a tenant's data: which instance does the background work of a kind, until when.
CREATE TABLE receipts.background_leases (
    name       text        PRIMARY KEY,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);
COMMENT ON TABLE receipts.background_leases IS
    'One worker at a time across instances: the holder renews its lease with each batch; another takes over once it expires.';
COMMENT ON COLUMN receipts.background_leases.holder IS 'The instance (its name and a random suffix) that holds the lease.';
COMMENT ON COLUMN receipts.background_leases.expires_at IS 'Until when; a stopped holder''s lease is taken over after this.';
-- Row-level security as on every table, with the maintenance policy only (no tenant owns a
-- lease): the service reaches it through receipts.erasure_step alone.
ALTER TABLE receipts.background_leases ENABLE ROW LEVEL SECURITY;
ALTER TABLE receipts.background_leases FORCE ROW LEVEL SECURITY;
CREATE POLICY all_tenants_maintenance ON receipts.background_leases TO receipts_maintenance
    USING ((SELECT receipts.works_across_tenants())) WITH CHECK ((SELECT receipts.works_across_tenants()));
COMMENT ON POLICY all_tenants_maintenance ON receipts.background_leases IS
    'Members of receipts_maintenance see every lease while receipts.all_tenants is on or in a SECURITY DEFINER function for the service; see sql/migrations/0001_baseline.sql.';

GRANT SELECT, INSERT, UPDATE, DELETE ON receipts.deleted_messages, receipts.chat_purges, receipts.api_keys, receipts.token_revocations,
    receipts.erasures, receipts.erasure_chats, receipts.tenant_erasures
    TO receipts_service;

DO $$
DECLARE
    v_table regclass;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['receipts.deleted_messages', 'receipts.chat_purges', 'receipts.api_keys',
                                   'receipts.token_revocations', 'receipts.erasures', 'receipts.erasure_chats',
                                   'receipts.tenant_erasures']::regclass[]
    LOOP
        EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', v_table);
        EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', v_table);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %s '
            'USING (tenant_id = current_setting(''receipts.tenant_id'', true)) '
            'WITH CHECK (tenant_id = current_setting(''receipts.tenant_id'', true))',
            v_table);
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
