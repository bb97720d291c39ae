-- Chunk rows come with their message: every chunk up to the chat's last numbered member (the
-- chat row is locked by every send and join, so the number cannot move meanwhile).
CREATE OR REPLACE FUNCTION receipts.create_receipt_chunks() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF receipts.importing() THEN  -- an import writes whole chunk rows itself
        RETURN NULL;
    END IF;
    INSERT INTO receipts.receipt_chunks (tenant_id, chat_id, seq, chunk, message_id)
    SELECT inserted.tenant_id, inserted.chat_id, inserted.seq, chunk.chunk, inserted.message_id
    FROM inserted
    CROSS JOIN LATERAL generate_series(
        0, (SELECT receipts.receipt_chunk_of(greatest(chat.members_numbered - 1, 0)) FROM receipts.chats AS chat
            WHERE chat.tenant_id = inserted.tenant_id AND chat.chat_id = inserted.chat_id)) AS chunk(chunk)
    ORDER BY inserted.tenant_id, inserted.chat_id, inserted.seq, chunk.chunk;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION receipts.create_receipt_chunks() IS 'Trigger: the empty receipt chunk rows of inserted messages.';

DROP TRIGGER IF EXISTS create_receipt_chunks ON receipts.messages;
CREATE TRIGGER create_receipt_chunks
    AFTER INSERT ON receipts.messages
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION receipts.create_receipt_chunks();
