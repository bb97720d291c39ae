-- 0003: deleting messages and chats (DESIGN.md, "Deleting, erasing and credentials").
--
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

GRANT SELECT, INSERT, UPDATE, DELETE ON receipts.deleted_messages, receipts.chat_purges TO receipts_service;

DO $$
DECLARE
    v_table regclass;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['receipts.deleted_messages', 'receipts.chat_purges']::regclass[]
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
