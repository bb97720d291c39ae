-- 0010: a member may mute a chat (PUT /v1/chats/{chatId}/members/{userId}/settings).
--
-- A muted chat still counts its unread messages, and GET /v1/users/{userId}/unread still
-- lists it (with "muted": true), but the user's total and badge leave it out, as the app
-- icon of Stream or Telegram does. The setting is the member's: it stays through a leave and
-- a rejoin, and goes with the member row.

ALTER TABLE receipts.chat_members ADD COLUMN muted boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN receipts.chat_members.muted IS
    'The member muted the chat: its unread messages are counted but left out of their total and badge (receipts.set_chat_muted).';

-- receipts.unread_counts answers muted too (sql/functions/unread.sql): a new result type.
DROP FUNCTION IF EXISTS receipts.unread_counts(text, text);
