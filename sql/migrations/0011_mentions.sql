-- 0011: messages that mention members (POST /v1/chats/{chatId}/messages "mentions",
-- "mentionsAll"), and unread mentions counted per chat and for the user.
--
-- A message keeps whom it named (messages.mentions: members when it was sent, not the
-- sender, each once) and whether it mentioned everyone (messages.mentions_all). What the
-- counts read is receipts.mentions: one row per member a message mentions, everyone's row
-- for a message that mentioned all. A member's unread mentions in a chat are their rows
-- above their read watermark that they have not read out of order: a range of an index,
-- as long as what is unread, whatever the length of the history (sql/views/unread.sql).

ALTER TABLE receipts.messages
    ADD COLUMN mentions text[] COLLATE "C" NOT NULL DEFAULT '{}',
    ADD COLUMN mentions_all boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN receipts.messages.mentions IS
    'The members the message named when it was sent (not its sender, each once, in the order given).';
COMMENT ON COLUMN receipts.messages.mentions_all IS
    'The message mentioned every member it was sent to (receipts.mentions has a row for each).';

CREATE TABLE receipts.mentions (
    tenant_id receipts.identifier NOT NULL,
    chat_id   receipts.identifier NOT NULL,
    user_id   receipts.identifier NOT NULL,
    seq       bigint NOT NULL,
    PRIMARY KEY (tenant_id, chat_id, user_id, seq),
    FOREIGN KEY (tenant_id, chat_id, seq) REFERENCES receipts.messages (tenant_id, chat_id, seq) ON DELETE CASCADE
);
COMMENT ON TABLE receipts.mentions IS
    'One row per member a message mentions (every member it was sent to, for one that mentioned all): what unread mention counts read, by user above their watermark.';
-- A message's mentions (a page shows them; a deleted message takes its rows with it).
CREATE INDEX mentions_by_message ON receipts.mentions (tenant_id, chat_id, seq);
GRANT SELECT, INSERT, UPDATE, DELETE ON receipts.mentions TO receipts_service;
CALL receipts.protect_tenant_table('receipts.mentions');

-- Sending takes the mentions (sql/functions/sending.sql), and unread counts answer the
-- mentions (sql/functions/unread.sql): new arguments and result types, made again by the
-- scripts right after.
DROP FUNCTION IF EXISTS receipts.send_each(text, text[], text[], text[], text[]);
DROP FUNCTION IF EXISTS receipts.unread_counts(text, text);
