-- 0009: a message's text can be edited (PATCH /v1/chats/{chatId}/messages/{messageId}).
--
-- An edit rewrites the message row's body and sets edited_at; its receipts (the chunk rows),
-- counts and labels stay as they were, and it is unread again for nobody. It writes a
-- message.edited event to the chat's members and the tenant key (receipts.edit_message,
-- sql/functions/sending.sql). Until now a message row was never written after its insert.

ALTER TABLE receipts.messages ADD COLUMN edited_at timestamptz;
COMMENT ON COLUMN receipts.messages.edited_at IS
    'When the text was last changed by an edit (receipts.edit_message); null while it is as sent.';
COMMENT ON TABLE receipts.messages IS
    'Messages; their receipts are in receipts.receipt_chunks. A row is written again only by an edit of its text (receipts.edit_message).';

ALTER TABLE receipts.events DROP CONSTRAINT events_type_check;
ALTER TABLE receipts.events ADD CONSTRAINT events_type_check CHECK (type IN (
    'message.created', 'receipt.delivered', 'receipt.read', 'unread.changed',
    'message.deleted', 'chat.deleted', 'user.erased', 'message.edited'));
